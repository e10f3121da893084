// Sharded checkpoints (full sharding): each rank writes its own shard file
// into <checkpoint>.shards/, atomic and checksummed as any checkpoint; the
// main rank then writes the index under the checkpoint's own name
// (checkpoint_<step>.mdl), last, once every rank has said its shard is on
// disk. So a checkpoint is listed, autoloaded and pruned only when it is
// complete, and an interrupted one leaves only a .shards folder that
// nothing reads. load_checkpoint_file gives any reader (resume, eval,
// eval_all, convert, generate) the whole checkpoint, assembled from the
// shards as an unsharded run would have saved it.
// Defines: shards_dir, shard_path, save_shard, ShardedIndex, save_sharded_index,
// assemble_sharded.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

namespace zoo::ckpt {

std::string shards_dir(const std::string& index_path);
// <index_path>.shards/shard_<rank>_of_<world_size>.mdl
std::string shard_path(const std::string& index_path, int rank, int world_size);

// The index's "__sharded__" entry says what the shards hold:
//   id: the same in the index and every shard of one write
//   world_size, shapes {name: sizes}, param_keys {checkpoint key: name},
//   optimizer_names [name per optimizer state index], optimizer_param_groups.
// Each shard: {"pieces": {name: {offset, model, optimizer}}, "__shard__": {id, rank}}.
// Returns the index's dict with "model" and "optimizer" made whole; throws
// std::runtime_error naming a missing, corrupt or foreign shard.
// Writing, called by full sharding (runner/parallel/full_shard.cpp): every
// rank its shard, then the main rank the index, once all shards are written.
void save_shard(const std::string& index_path, int rank, int world_size, const std::string& id,
                const c10::impl::GenericDict& pieces);
struct ShardedIndex {
  std::string id;
  int world_size = 1;
  std::map<std::string, std::vector<int64_t>> shapes;  // each sharded parameter's whole shape
  std::vector<std::string> optimizer_names;
  c10::impl::GenericList optimizer_param_groups{c10::AnyType::get()};
};
// The index under the checkpoint's own name: `model`'s buffers whole, its
// parameters' checkpoint keys, and the run's other states (`run_state`).
void save_sharded_index(const std::string& index_path, const ShardedIndex& index, const torch::nn::Module& model,
                        const c10::impl::GenericDict& run_state);

c10::impl::GenericDict assemble_sharded(const c10::impl::GenericDict& index, const std::string& index_path);

}  // namespace zoo::ckpt
