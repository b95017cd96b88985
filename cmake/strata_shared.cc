// Translation unit anchoring libstrata.so; the code comes from the module archives.
