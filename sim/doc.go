// Package sim predicts how fast the gradient pipelines train at scales and on networks this
// machine does not have, by running the real pipeline code on a virtual clock.
//
// A simulated step replays a model's compute from a profile (package profile): forward,
// then each tensor's share of backward, after which its gradient is pushed into the
// pipeline, as the trainer's gradient hook does. The pipeline runs unchanged on a simulated
// communicator: its selections take the time a selection model predicts, its collectives
// the time a network cost model (package netmodel) predicts, and time moves from one
// goroutine to another only along causes (a gradient's readiness, a selection's end, a
// collective's end). The step ends when the last gradient is aggregated and the optimizer
// has run.
//
// The package owns the machinery that makes this possible: the virtual clock
// (VirtualClock), on which every goroutine keeps a time of its own, and the simulated
// communicators (NewSim, NewSimRank), whose collectives take the time a CostModel predicts.
// A Sweep runs many jobs: every pipeline at every scale on every network, for every
// profile; Config is a sweep as the simulate command gives it, checked and built by
// Config.Sweep.
//
// Up to a few ranks (Job.Real), every rank is a goroutine that moves real data, so that the
// aggregated gradients can be checked against a real run. Beyond that, one rank stands for
// all: the ranks are taken to be identical, collectives are charged as among all of them,
// and memory stays that of one rank. A pipeline whose messages depend on the sending rank
// gives the others' through Mirrorer.
//
// The simulator checks itself against this machine (Validator): it trains an experiment's
// runs, each writing the compute profile it measured, and predicts each from its profile.
package sim
