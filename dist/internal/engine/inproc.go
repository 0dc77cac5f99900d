package engine

import (
	"net"

	"github.com/ssfusion/ssfusion/dist"
)

// InProc wires size engines with in-memory pipes: the ranks of a job in one process.
func InProc(size int, o dist.Options) []*Engine {
	conns := PipeMesh(size)
	engines := make([]*Engine, size)
	for r := range size {
		engines[r] = New(r, size, conns[r], o)
	}
	return engines
}

// PipeMesh returns conns[i][j], the end at rank i of the pipe between ranks i and j.
func PipeMesh(size int) [][]net.Conn {
	conns := make([][]net.Conn, size)
	for i := range conns {
		conns[i] = make([]net.Conn, size)
	}
	for i := range size {
		for j := i + 1; j < size; j++ {
			conns[i][j], conns[j][i] = net.Pipe()
		}
	}
	return conns
}
