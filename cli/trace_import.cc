// `strata trace import` and `strata trace export`: text formats to and from
// traces (trace/importers.h).
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "strata/trace.h"
#include "trace/importers.h"
#include "trace/limits.h"

namespace strata::cli {
namespace {

struct ImportArgs {
  std::string format;
  std::string input;
  std::string out;
  uint32_t batch_size = 4096;
  std::string label;
  std::string columns;
  std::string delimiter = ",";
  bool json = false;
};

void RunImport(const ImportArgs& a) {
  trace::ImportOptions o;
  o.batch_size = a.batch_size;
  o.label = a.label;
  if (a.delimiter.size() != 1) {
    return ReportFailure("trace import",
                         Status::InvalidArgument("--delimiter must be one character"));
  }
  o.delimiter = a.delimiter[0];
  if (!a.columns.empty()) {
    auto columns = SplitList(a.columns, "--columns");
    if (!columns.ok()) return ReportFailure("trace import", columns.status());
    o.columns = *columns;
  }
  Result<trace::TraceTotals> totals =
      Status::InvalidArgument("--format '" + a.format + "' unknown (criteo, csv, lines)");
  if (a.format == "criteo") totals = trace::ImportCriteo(a.input, a.out, o);
  if (a.format == "csv") totals = trace::ImportCsv(a.input, a.out, o);
  if (a.format == "lines") totals = trace::ImportLines(a.input, a.out);
  if (!totals.ok()) return ReportFailure("trace import", totals.status());
  if (a.json) {
    nlohmann::json j = {{"out", a.out}, {"batches", totals->batches}, {"keys", totals->keys}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("wrote %s: %llu batches, %llu keys\n", a.out.c_str(),
                static_cast<unsigned long long>(totals->batches),
                static_cast<unsigned long long>(totals->keys));
  }
}

struct ExportArgs {
  std::string format = "lines";
  std::string trace;
  uint32_t table = 0;
  bool one_table = false;  // --table given
};

void RunExport(const ExportArgs& a) {
  if (a.format != "lines") {
    return ReportFailure("trace export",
                         Status::InvalidArgument("--format '" + a.format + "' unknown (lines)"));
  }
  const Status s = trace::ExportLines(a.trace, a.one_table ? int64_t{a.table} : -1, stdout);
  if (!s.ok()) return ReportFailure("trace export", s);
  if (std::fflush(stdout) != 0) {
    ReportFailure("trace export", Status::FromErrno(errno, "flush stdout"));
  }
}

CommandRegistrar reg_import{
    "trace", [](CLI::App& group) {
      auto args = std::make_shared<ImportArgs>();
      auto* c =
          group.add_subcommand("import", "convert a Criteo TSV, CSV or lines file to a trace");
      c->add_option("--format", args->format, "criteo, csv or lines")->required();
      c->add_option("input", args->input, "text file to read")->required();
      c->add_option("--out", args->out, "trace file to write")->required();
      AddUnsigned<uint32_t>(c, "--batch-size", args->batch_size, "rows per batch (criteo, csv)", 1,
                            trace::kBatchSizeMax)
          ->capture_default_str();
      c->add_option("--label", args->label, "csv: the label column (not imported)");
      c->add_option("--columns", args->columns,
                    "csv: categorical columns, comma-separated (default: all but the label)");
      c->add_option("--delimiter", args->delimiter, "csv: field separator")->capture_default_str();
      c->add_flag("--json", args->json, "print JSON");
      c->callback([args] { RunImport(*args); });
    }};

CommandRegistrar reg_export{
    "trace", [](CLI::App& group) {
      auto args = std::make_shared<ExportArgs>();
      auto* c = group.add_subcommand("export", "write a trace as text, one batch per line");
      c->add_option("--format", args->format, "lines")->capture_default_str();
      c->add_option("trace", args->trace, "trace file")->required();
      CLI::Option* table = AddUnsigned<uint32_t>(c, "--table", args->table,
                                                 "only this table id (default: all, concatenated)",
                                                 0, trace::kTraceTablesMax - 1);
      c->callback([args, table] {
        args->one_table = table->count() > 0;
        RunExport(*args);
      });
    }};

}  // namespace
}  // namespace strata::cli
