// Package netmodel owns the project's one network cost model: the alpha-beta model
// (Hockney) of a cluster's links, a message of m bytes taking alpha + m*beta, and the cost
// of each collective that our transport (package dist) or a collectives library runs over
// them, flat or hierarchical (ranks grouped into nodes). The simulator times collectives
// with it, and the planners that weigh communication, SSFusion's choice of the tensors to
// sparsify and SAFusion's sizing of its fusion buffers, plan with it.
//
// It also reads a link as the command line gives it (ParseCable: a rate and a latency),
// so that the transport's link emulation, the planners and the simulator agree on what
// --bandwidth and --latency mean.
package netmodel
