package sim

import (
	"math"
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
		clock := dist.NewVirtualClock(nil)
		comm := dist.NewSimRank(tc.size, netmodel.Network{Inter: link, AllReduceAlg: netmodel.Ring}, clock)
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
