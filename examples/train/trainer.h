// Trainer: the training loop of the example, written against the public
// Store API only, so it serves as a template for pipelines embedding Strata.
//
// Per batch (from the BatchLoader, which has already signalled its intents):
//   Pull each table's unique keys -> FM forward (host) -> if training:
//   backward (host), Push each table's row gradients (the store applies
//   AdaGrad where the row lives), AdaGrad on the dense part -> AdvanceClock.
// Per epoch it reports logloss and AUC on the training rows (progressive:
// each row scored just before the model trains on it, the usual online
// estimate, which costs no extra pass) and on the validation rows (scored
// after the epoch's training), rows/s, and the store's counters over the
// epoch: per-tier hits, SSD reads, stall fraction. With
// checkpoint_each_epoch the store is checkpointed after every epoch.
//
// Thread safety: Train runs on the calling thread plus one loader thread.
// The store is borrowed; Train registers its own worker.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "examples/train/batch_loader.h"
#include "examples/train/dataset.h"
#include "examples/train/fm_model.h"
#include "strata/store.h"

namespace strata::train {

struct TrainOptions {
  FmConfig model;
  LoaderOptions loader;
  // When set, the run's access sequence (each batch's unique keys per table,
  // worker 0, in clock order) is written there as a trace (strata/trace.h).
  std::string trace_path;
  // Checkpoint the store at the end of every epoch (a store directory kept
  // after the run then holds the trained rows; the dense part of the model
  // is not in the store). Costs a flush of the dirty rows per epoch, not
  // counted in the epoch's seconds.
  bool checkpoint_each_epoch = false;
  // Data-parallel training over a strata::Cluster (cluster_train.h): the
  // store's Pull, Push and AdvanceClock are collective, so every table is
  // pushed every training batch, even with no keys; after each dense step
  // `average_dense` (when set) replaces the dense parameters by their mean
  // over the ranks; before the epoch's metrics `gather_scores` (when set)
  // replaces this rank's logits and labels by every rank's, so every rank
  // reports the metrics of all.
  bool collective_calls = false;
  std::function<Status(DenseParams*)> average_dense;
  // When set, replaces the model's own dense step (AdaGrad, then
  // average_dense): called after each training batch's backward with the
  // batch's dense gradients, it updates the dense parameters (k-step Adam
  // over the ranks, cluster_train.h). `end_of_training`, when set, is called
  // once per epoch after its last training batch, before its validation rows
  // are scored (where the ranks merge their dense copies).
  std::function<Status(const DenseParams& grads, DenseParams* params)> dense_step;
  std::function<Status(DenseParams* params)> end_of_training;
  std::function<Status(std::vector<float>* logits, std::vector<float>* labels)> gather_scores;
};

struct EpochReport {
  uint32_t epoch = 0;
  double train_logloss = 0, train_auc = 0;
  double validation_logloss = 0, validation_auc = 0;
  uint64_t rows = 0;  // training plus validation rows processed
  double seconds = 0;
  double rows_per_s = 0;
  double loader_wait_fraction = 0;  // share of the epoch the trainer waited for a batch
  // Store counters over the epoch (differences of Stats()).
  uint64_t pulls = 0, stall_pulls = 0;
  double stall_fraction = 0;  // stall_pulls / pulls
  uint64_t t0_hits = 0, t1_hits = 0, ssd_row_reads = 0, ssd_row_writes = 0;
  uint64_t prefetched_rows = 0, late_prefetches = 0;
  double checkpoint_seconds = 0;  // the epoch's checkpoint (0 without checkpoint_each_epoch)
};

struct TrainResult {
  std::vector<EpochReport> epochs;
  std::vector<float> validation_logits;  // last epoch, validation rows in file order
  DenseParams dense;                     // final dense parameters
  uint64_t unique_keys = 0;              // distinct (table, key) pairs the run touched
  StoreStats final_stats;
};

// The tables the model needs in a store: one per categorical column of
// `data`, named after the column, rows of RowDim(config.dim) floats, AdaGrad
// with the model's learning rate, uniform initializer.
std::vector<TableOptions> MakeTables(const Dataset& data, const FmConfig& config);

// Trains on `data` through `store`, whose tables must be MakeTables(data, ...).
Result<TrainResult> Train(Store* store, const Dataset& data, const TrainOptions& options);

}  // namespace strata::train
