package dist

import (
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
)

// Benchmarks run every rank as a goroutine of this process (the TCP ranks talk over
// loopback sockets), back to back, as nccl-tests does. They report the time per
// collective in ms and the bus bandwidth in GB/s: the rate at which each link would
// have to move data for an algorithm-optimal collective to take that time, comparable
// across rank counts (allreduce: size/t * 2(P-1)/P; allgather: total/t * (P-1)/P).

var benchSizes = []int{1 << 10, 64 << 10, 1 << 20, 16 << 20, 100 << 20}

func sizeName(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%dMB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%dKB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// benchRanks runs fn(r, c) b.N times on every rank concurrently.
func benchRanks(b *testing.B, comms []Communicator, fn func(r int, c Communicator) error) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(comms))
	b.ResetTimer()
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range b.N {
				if err := fn(r, c); err != nil {
					errs[r] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	for r, err := range errs {
		if err != nil {
			b.Fatalf("rank %d: %v", r, err)
		}
	}
}

func reportBus(b *testing.B, bytesPerLink float64) {
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(sec*1e3, "ms")
	b.ReportMetric(bytesPerLink/sec/1e9, "busGB/s")
}

// benchAllReduce times summing size bytes of float32 on every rank of comms.
func benchAllReduce(b *testing.B, comms []Communicator, size int) {
	P := len(comms)
	bufs := make([][]float32, P)
	for r := range bufs {
		bufs[r] = make([]float32, size/4)
	}
	benchRanks(b, comms, func(r int, c Communicator) error { return c.AllReduce(bufs[r], Sum) })
	reportBus(b, float64(size)*2*float64(P-1)/float64(P))
}

// benchAllGatherV times gathering size bytes in all, each rank of comms sending its share.
func benchAllGatherV(b *testing.B, comms []Communicator, size int) {
	P := len(comms)
	send := make([][]byte, P)
	for r := range send {
		send[r] = make([]byte, size/P)
	}
	benchRanks(b, comms, func(r int, c Communicator) error {
		_, err := c.AllGatherV(send[r])
		return err
	})
	reportBus(b, float64(size)*float64(P-1)/float64(P))
}

func BenchmarkAllReduce(b *testing.B) {
	for _, be := range backends {
		for _, P := range []int{2, 4} {
			b.Run(fmt.Sprintf("%s/P=%d", be.name, P), func(b *testing.B) {
				comms := be.start(b, P)
				for _, size := range benchSizes {
					b.Run(sizeName(size), func(b *testing.B) {
						benchAllReduce(b, comms, size)
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
				for _, size := range benchSizes[:4] {
					b.Run(sizeName(size), func(b *testing.B) {
						benchAllGatherV(b, comms, size)
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
			benchRanks(b, make([]Communicator, P), func(r int, _ Communicator) error {
				buf, n := bufs[r], len(bufs[r])
				chunk := func(c int) []float32 { c = (c%P + P) % P; return buf[c*n/P : (c+1)*n/P] }
				for i := range 2 * (P - 1) {
					out, in := chunk(r-i), chunk(r-i-1)
					sent := make(chan error, 1)
					go func() { _, err := right[r].Write(f32Bytes(out, true)); sent <- err }()
					dst := in
					if i < P-1 {
						dst = tmp[r][:len(in)]
					}
					if _, err := io.ReadFull(left[r], f32Bytes(dst, true)); err != nil {
						return err
					}
					if i < P-1 {
						sumInto(in, dst, in)
					}
					if err := <-sent; err != nil {
						return err
					}
				}
				return nil
			})
			reportBus(b, 100e6*2*float64(P-1)/float64(P))
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
