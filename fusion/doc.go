// Package fusion is the engine most gradient pipelines are built on: tensor fusion in
// backprop order, as Horovod does it. It learns the backprop order in the first step and
// agrees on it across ranks (Stepper), packs tensors into fusion buffers (Bucket,
// PlanBuckets, GroupBuckets, DenseBuffer, SparseBuffer), issues each step's collectives in
// one order on every rank as soon as they are ready (Controller), runs offloaded work
// (Pool), measures the step (Meter) and keeps the state a checkpoint needs.
//
// A pipeline built on it supplies a Stage: how a gradient is prepared, which collectives a
// step issues and how their results land in the gradients. Fusion drives the Stage through
// the pipeline.Pipeline calls and gives it a narrow Engine to call back.
package fusion
