// Package tcp is the default transport: a job's ranks joined by a full mesh of TCP
// connections, on one machine or across several, with the message engine's collectives,
// failure detection and link emulation on top (see package dist). On Linux, Dial moves a
// job whose ranks all share a machine onto shared memory (package dist/shm).
//
// # Starting a job
//
// A launcher (train --workers N) starts N processes with, in each environment:
//
//	RANK=r  WORLD_SIZE=N  LOCAL_RANK=r  MASTER_ADDR=127.0.0.1  MASTER_PORT=p  SSF_JOB_TOKEN=t
//
// where p is the port of a listener the launcher opened on rank 0's machine and t a fresh
// random token (NewJobToken); Config.Environ builds the list. Rank 0 inherits that
// listener (InheritListener, SSF_MASTER_FD) rather than binding p again, so no other
// process can take the port between its choice and the rendezvous (a program that runs
// rank 0 in-process sets Config.Listener instead). Each worker calls ConfigFromEnv, sets BindAddr,
// Timeout, Bandwidth and Latency from its flags, and calls Dial. Processes started by
// mpirun are recognised by OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE instead (MASTER_*
// and the token are then passed with mpirun -x). ConfigFromEnv returns ErrNoEnv when the
// process is not a worker, which is how a command knows it should launch them. Run in package dist/launch, the launcher, gives each worker GOMAXPROCS as its share of the CPUs and, on
// Linux with at least as many CPUs as workers, binds it to a share of its own, as mpirun
// binds ranks to cores (SSF_BIND=none, or GOMAXPROCS set, leaves them unbound).
//
// Rank 0 listens at MASTER_PORT on BindAddr; every other rank listens on an ephemeral port
// of BindAddr, dials MASTER_ADDR, proves it holds the token (HMAC challenge, both ways)
// and reports the address peers should dial. Rank 0 answers with every rank's address,
// and the ranks form a full mesh, each dialling the ranks below it. Connections without
// the token, with another world size or a rank already taken are logged with their remote
// address and closed; the job goes on. Listeners close once the mesh is complete.
//
// Across machines, start one worker per machine (or several) with its own RANK, the same
// WORLD_SIZE, MASTER_ADDR set to rank 0's reachable address, and BindAddr set to an
// interface address or 0.0.0.0 (the default, 127.0.0.1, keeps a job on one machine). A
// rank advertises AdvertiseAddr if set, else its bind address, else (when bound to a
// wildcard) the local address of its connection to rank 0.
package tcp
