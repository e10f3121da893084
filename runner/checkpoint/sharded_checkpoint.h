// Sharded checkpoints (full sharding): each rank writes its own shard file
// into <checkpoint>.shards/, atomic and checksummed as any checkpoint; the
// main rank then writes the index under the checkpoint's own name
// (checkpoint_<step>.mdl), last, once every rank has said its shard is on
// disk. So a checkpoint is listed, autoloaded and pruned only when it is
// complete, and an interrupted one leaves only a .shards folder that
// nothing reads. load_checkpoint_file gives any reader (resume, eval,
// eval_all, convert, generate) the whole checkpoint, assembled from the
// shards as an unsharded run would have saved it.
// Defines: shards_dir, shard_path, assemble_sharded.
#pragma once

#include <torch/torch.h>

#include <string>

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
c10::impl::GenericDict assemble_sharded(const c10::impl::GenericDict& index, const std::string& index_path);

}  // namespace zoo::ckpt
