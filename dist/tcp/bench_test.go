package tcp

import (
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/dist/internal/disttest"
	"github.com/ssfusion/ssfusion/dist/internal/wire"
)

// Benchmarks run every rank as a goroutine of this process (the TCP ranks talk over
// loopback sockets), back to back, as nccl-tests does. They report the time per
// collective in ms and the bus bandwidth in GB/s: the rate at which each link would
// have to move data for an algorithm-optimal collective to take that time, comparable
// across rank counts (allreduce: size/t * 2(P-1)/P; allgather: total/t * (P-1)/P).

func BenchmarkAllReduce(b *testing.B) {
	for _, be := range backends {
		for _, P := range []int{2, 4} {
			b.Run(fmt.Sprintf("%s/P=%d", be.name, P), func(b *testing.B) {
				comms := be.start(b, P)
				for _, size := range disttest.BenchSizes {
					b.Run(disttest.SizeName(size), func(b *testing.B) {
						disttest.BenchAllReduce(b, comms, size)
					})
				}
			})
		}
	}
}

func BenchmarkAllGatherV(b *testing.B) {
	for _, be := range backends {
		for _, P := range []int{2, 4} {
			b.Run(fmt.Sprintf("%s/P=%d", be.name, P), func(b *testing.B) {
				comms := be.start(b, P)
				// size is the total gathered; each rank sends its share.
				for _, size := range disttest.BenchSizes[:4] {
					b.Run(disttest.SizeName(size), func(b *testing.B) {
						disttest.BenchAllGatherV(b, comms, size)
					})
				}
			})
		}
	}
}

// BenchmarkPlainTCPRing is the yardstick for BenchmarkAllReduce/tcp: the simplest ring
// allreduce over loopback sockets (no framing, no pipelining, reads straight into
// place), run the same way, so that figures taken on a busy machine can be compared.
func BenchmarkPlainTCPRing(b *testing.B) {
	for _, P := range []int{2, 4} {
		b.Run(fmt.Sprintf("P=%d/100MB", P), func(b *testing.B) {
			right, left := plainRing(b, P)
			bufs := make([][]float32, P)
			tmp := make([][]float32, P)
			for r := range bufs {
				bufs[r] = make([]float32, 25<<20)
				tmp[r] = make([]float32, len(bufs[r])/P+1)
			}
			disttest.BenchRanks(b, make([]dist.Communicator, P), func(r int, _ dist.Communicator) error {
				buf, n := bufs[r], len(bufs[r])
				chunk := func(c int) []float32 { c = (c%P + P) % P; return buf[c*n/P : (c+1)*n/P] }
				for i := range 2 * (P - 1) {
					out, in := chunk(r-i), chunk(r-i-1)
					sent := make(chan error, 1)
					go func() { _, err := right[r].Write(wire.F32Bytes(out, true)); sent <- err }()
					dst := in
					if i < P-1 {
						dst = tmp[r][:len(in)]
					}
					if _, err := io.ReadFull(left[r], wire.F32Bytes(dst, true)); err != nil {
						return err
					}
					if i < P-1 {
						wire.SumInto(in, dst, in)
					}
					if err := <-sent; err != nil {
						return err
					}
				}
				return nil
			})
			disttest.ReportBus(b, 100e6*2*float64(P-1)/float64(P))
		})
	}
}

// plainRing connects rank r to r+1 over loopback: right[r] writes to left[r+1].
func plainRing(b *testing.B, P int) (right, left []net.Conn) {
	right, left = make([]net.Conn, P), make([]net.Conn, P)
	for r := range P {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		prev := (r - 1 + P) % P
		if right[prev], err = net.Dial("tcp", ln.Addr().String()); err != nil {
			b.Fatal(err)
		}
		if left[r], err = ln.Accept(); err != nil {
			b.Fatal(err)
		}
		ln.Close()
	}
	b.Cleanup(func() {
		for r := range P {
			right[r].Close()
			left[r].Close()
		}
	})
	return right, left
}
