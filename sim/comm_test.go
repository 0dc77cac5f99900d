package sim

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/netmodel"
)

// TestSimRingAllReduceIsTheFormula: a lone ring allreduce on a fresh virtual clock ends
// exactly when the ring formula of the alpha-beta model (Hockney) says,
// 2(P-1)alpha + 2(P-1)/P m beta.
func TestSimRingAllReduceIsTheFormula(t *testing.T) {
	link, _ := netmodel.NetworkPreset(10e9)
	for _, tc := range []struct{ size, elems int }{{2, 1}, {8, 1 << 20}, {64, 25_557_032}, {256, 1000}} {
		clock := NewVirtualClock(nil)
		comm := NewSimRank(tc.size, netmodel.Network{Inter: link, AllReduceAlg: netmodel.Ring}, clock)
		if err := comm.AllReduce(make([]float32, tc.elems), dist.Average); err != nil {
			t.Fatal(err)
		}
		p, m := float64(tc.size), 4*float64(tc.elems)
		want := time.Duration(math.Round((2*(p-1)*link.Alpha + 2*(p-1)/p*m*link.Beta) * 1e9))
		if got := clock.Elapsed(); got != want {
			t.Errorf("P=%d, %d floats: the clock reads %v, the formula %v", tc.size, tc.elems, got, want)
		}
		if st := comm.Stats(); st.AllReduce.Calls != 1 || st.AllReduce.Time != want {
			t.Errorf("P=%d: stats %+v", tc.size, st.AllReduce)
		}
	}
}

// fixedCost charges a collective its kind's constant plus a nanosecond per byte of the
// largest contribution.
type fixedCost struct{}

func (fixedCost) AllReduce(size, bytes int) time.Duration {
	return time.Millisecond + time.Duration(bytes)
}
func (fixedCost) AllGatherV(size int, bytes []int) time.Duration {
	most := 0
	for _, b := range bytes {
		most = max(most, b)
	}
	return 2*time.Millisecond + time.Duration(most)
}
func (fixedCost) AllToAllV(size int, sent []int) time.Duration {
	most := 0
	for _, b := range sent {
		most = max(most, b)
	}
	return 5*time.Millisecond + time.Duration(most)
}
func (fixedCost) SendRecv(size int, bytes []int) time.Duration {
	return 6*time.Millisecond + time.Duration(slices.Max(bytes))
}
func (fixedCost) Broadcast(size, bytes int) time.Duration { return 3 * time.Millisecond }
func (fixedCost) Barrier(size int) time.Duration          { return 4 * time.Millisecond }

// TestSimRanksMeetAndQueue: real ranks start a collective when the last of them issues it,
// wait for the network to be free of the one before, and move real data.
func TestSimRanksMeetAndQueue(t *testing.T) {
	clock := NewVirtualClock(nil)
	comms := NewSim(3, fixedCost{}, clock)
	ends := make([]time.Duration, 3)
	sums := make([][]float32, 3)
	gathered := make([][][]byte, 3)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Go(func() {
			defer c.Close()
			clock.Advance(time.Duration(r+1) * 10 * time.Millisecond) // rank 2 issues last, at 30 ms
			buf := []float32{float32(r), 1}
			h := c.AllReduceAsync(buf, dist.Sum)
			// Issued right after: queued behind the allreduce on the network.
			g := c.AllGatherVAsync(bytes.Repeat([]byte{byte(r)}, 100*(r+1)))
			if err := h.Wait(); err != nil {
				t.Error(err)
			}
			out, err := g.Wait()
			if err != nil {
				t.Error(err)
			}
			sums[r], gathered[r], ends[r] = buf, out, clock.Elapsed()
		})
	}
	wg.Wait()
	// allreduce: 30 ms + 1 ms + 8 ns; allgather: then 2 ms + 300 ns.
	want := 30*time.Millisecond + time.Millisecond + 8 + 2*time.Millisecond + 300
	for r := range 3 {
		if ends[r] != want {
			t.Errorf("rank %d ends at %v, want %v", r, ends[r], want)
		}
		if sums[r][0] != 3 || sums[r][1] != 3 {
			t.Errorf("rank %d: allreduce gave %v, want [3 3]", r, sums[r])
		}
		for q := range 3 {
			if len(gathered[r][q]) != 100*(q+1) {
				t.Errorf("rank %d got %d bytes from rank %d", r, len(gathered[r][q]), q)
			}
		}
	}
}

// TestSimAllToAllV: real ranks exchange real blocks and pay the cost model for the
// busiest sender; a lone rank gets from every rank the block it addressed to itself.
func TestSimAllToAllV(t *testing.T) {
	clock := NewVirtualClock(nil)
	comms := NewSim(3, fixedCost{}, clock)
	got := make([][][]byte, 3)
	ends := make([]time.Duration, 3)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Go(func() {
			defer c.Close()
			send := make([][]byte, 3)
			for q := range send {
				send[q] = bytes.Repeat([]byte{byte(10*r + q)}, 100*(r+1))
			}
			out, err := c.AllToAllV(send)
			if err != nil {
				t.Error(err)
			}
			got[r], ends[r] = out, clock.Elapsed()
		})
	}
	wg.Wait()
	// The busiest sender, rank 2, sends 300 bytes to each of two peers.
	want := 5*time.Millisecond + 600
	for r := range 3 {
		if ends[r] != want {
			t.Errorf("rank %d ends at %v, want %v", r, ends[r], want)
		}
		for q := range 3 {
			if b := got[r][q]; len(b) != 100*(q+1) || b[0] != byte(10*q+r) {
				t.Errorf("rank %d: block from rank %d = %d bytes of %v", r, q, len(b), b[:min(len(b), 1)])
			}
		}
	}
	if s := comms[1].Stats().AllToAllV; s.Calls != 1 || s.BytesSent != 400 || s.Time != want {
		t.Errorf("rank 1's stats: %+v, want 1 call, 400 bytes, %v", s, want)
	}

	lone := NewSimRank(4, fixedCost{}, NewVirtualClock(nil))
	out, err := lone.AllToAllV([][]byte{[]byte("to me"), []byte("a"), nil, []byte("bc")})
	if err != nil || len(out) != 4 || string(out[3]) != "to me" || string(out[0]) != "to me" {
		t.Errorf("lone rank: %q, %v", out, err)
	}
	if _, err := lone.AllToAllV(make([][]byte, 3)); !errors.Is(err, dist.ErrInvalid) {
		t.Errorf("3 blocks for 4 ranks: %v, want ErrInvalid", err)
	}
}

// TestSimSendRecv: real ranks exchange real blocks and pay for the largest; a lone rank
// gets its own block back, or what its Exchanger says its peer would send.
func TestSimSendRecv(t *testing.T) {
	clock := NewVirtualClock(nil)
	comms := NewSim(3, fixedCost{}, clock)
	got := make([][]byte, 3)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Go(func() {
			defer c.Close()
			out, err := c.SendRecv(bytes.Repeat([]byte{byte(r)}, 100*(r+1)), (r+1)%3, (r+2)%3)
			if err != nil {
				t.Error(err)
			}
			got[r] = out
			if at := clock.Elapsed(); at != 6*time.Millisecond+300 {
				t.Errorf("rank %d ends at %v, want 6ms + 300ns", r, at)
			}
		})
	}
	wg.Wait()
	for r := range 3 {
		from := (r + 2) % 3
		if len(got[r]) != 100*(from+1) || got[r][0] != byte(from) {
			t.Errorf("rank %d got %d bytes of %v from rank %d", r, len(got[r]), got[r][:1], from)
		}
	}

	lone := NewSimRank(4, fixedCost{}, NewVirtualClock(nil)).(*simComm)
	if out, err := lone.SendRecv([]byte("mine"), 1, 3); err != nil || string(out) != "mine" {
		t.Errorf("lone rank: %q, %v", out, err)
	}
	lone.setExchange(func(own []byte, from int) []byte { return append(bytes.Clone(own), byte('0'+from)) })
	if out, _ := lone.SendRecv([]byte("x"), 1, 3); string(out) != "x3" {
		t.Errorf("lone rank with an exchange: %q", out)
	}
	if _, err := lone.SendRecv(nil, 4, 0); !errors.Is(err, dist.ErrInvalid) {
		t.Errorf("sendrecv to rank 4 of 4: %v, want ErrInvalid", err)
	}
}

// TestSimRankMirrorsItself: a lone rank's collectives give what identical ranks would.
func TestSimRankMirrorsItself(t *testing.T) {
	clock := NewVirtualClock(nil)
	comm := NewSimRank(4, fixedCost{}, clock)
	buf := []float32{1, 2}
	if err := comm.AllReduce(buf, dist.Sum); err != nil || buf[0] != 4 || buf[1] != 8 {
		t.Errorf("sum over 4 identical ranks: %v, %v", buf, err)
	}
	if err := comm.AllReduce(buf, dist.Average); err != nil || buf[0] != 4 {
		t.Errorf("average over identical ranks changed the buffer: %v, %v", buf, err)
	}
	out, err := comm.AllGatherV([]byte("abc"))
	if err != nil || len(out) != 4 || string(out[3]) != "abc" {
		t.Errorf("allgather: %q, %v", out, err)
	}
	comm.(*simComm).setMirror(func(own []byte, rank int) []byte { return append(bytes.Clone(own), byte('0'+rank)) })
	out, _ = comm.AllGatherV([]byte("x"))
	if string(out[0]) != "x" || string(out[2]) != "x2" {
		t.Errorf("mirrored allgather: %q", out)
	}
	if err := comm.Broadcast([]byte("r"), 4); err == nil {
		t.Errorf("broadcast from rank 4 of 4 succeeded")
	}
	if err := comm.Barrier(); err != nil {
		t.Fatal(err)
	}
	st := comm.Stats()
	if st.AllReduce.Calls != 2 || st.AllGatherV.Calls != 2 || st.Barrier.Calls != 1 {
		t.Errorf("stats: %+v", st)
	}
	// 2 allreduces of 8 bytes, 2 allgathers (the largest messages 3 bytes, then a mirrored
	// 2), a barrier, one after another.
	want := 2*(time.Millisecond+8) + 2*time.Millisecond + 3 + 2*time.Millisecond + 2 + 4*time.Millisecond
	if got := clock.Elapsed(); got != want {
		t.Errorf("clock %v, want %v", got, want)
	}
	comm.Close()
	if err := comm.AllReduce(buf, dist.Sum); err == nil {
		t.Errorf("allreduce after Close succeeded")
	}
}

// TestSimRankChargesMirroredSizes: a lone rank's allgather costs what its mirrored
// messages add up to, not its own message times the ranks.
func TestSimRankChargesMirroredSizes(t *testing.T) {
	clock := NewVirtualClock(nil)
	comm := NewSimRank(3, fixedCost{}, clock)
	comm.(*simComm).setMirror(func(_ []byte, rank int) []byte { return make([]byte, 1000*rank) })
	if _, err := comm.AllGatherV([]byte("x")); err != nil {
		t.Fatal(err)
	}
	// fixedCost charges 2 ms plus the largest contribution: rank 2's 2000 bytes.
	if got, want := clock.Elapsed(), 2*time.Millisecond+2000; got != want {
		t.Errorf("clock %v, want %v", got, want)
	}
}
