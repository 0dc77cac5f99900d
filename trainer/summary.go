package trainer

import (
	"fmt"
	"time"

	"github.com/ssfusion/ssfusion/dist"
	"github.com/ssfusion/ssfusion/pipeline"
	"github.com/ssfusion/ssfusion/pipelines"
)

// finalLossWindow is how many last steps final_loss averages: one step's loss is too noisy to
// compare runs by.
const finalLossWindow = 20

// stepStats accumulates the per-step figures that summary.json averages. The first step is
// kept out of the timing averages: it pays one-off allocations and warm-up.
type stepStats struct {
	Steps       int
	FirstLoss   float64
	Recent      []float64
	Timed       int
	TimedSecs   float64
	Samples     int
	Ms          StepMS
	Bytes       float64
	DenseBytes  float64
	DensitySum  float64
	MissingSum  float64
	DensitySeen int
	// ImbalanceSum and ImbalanceSeen average the partition imbalance of the steps that
	// report one.
	ImbalanceSum  float64
	ImbalanceSeen int
	// ExtraSum and ExtraSeen average every pipeline-specific figure (StepMetrics.Extra)
	// over the steps that report it.
	ExtraSum  map[string]float64
	ExtraSeen map[string]int
}

// DivergenceFactor bounds a training step's loss: a loss above this many times the first
// step's (or above this many, when the first is below 1) stops the run as diverging.
const DivergenceFactor = 100

// diverged reports a training loss that has run away from the first step's, on the step
// that row records. Every rank judges its own loss, and the ranks agree, so that all stop
// at the same step when any one's loss ran away.
func (r *run) diverged(row Row) error {
	bound := DivergenceFactor * max(r.stats.FirstLoss, 1)
	mine := row.Loss > bound // also false for NaN, which the model refuses before this
	anyRank := mine
	if r.distributed() {
		flag := []float32{0}
		if mine {
			flag[0] = 1
		}
		if err := r.comm.AllReduce(flag, dist.Sum); err != nil {
			return fmt.Errorf("agreeing whether training diverged: %w", err)
		}
		anyRank = flag[0] > 0
	}
	switch {
	case mine:
		return fmt.Errorf("training diverged at step %d: loss %.4g is over %d times the first step's %.4g; try a lower --lr (this run had %g)",
			row.Step, row.Loss, DivergenceFactor, r.stats.FirstLoss, r.cfg.LR)
	case anyRank:
		return fmt.Errorf("training diverged at step %d on another rank: its loss is over %d times its first step's; try a lower --lr (this run had %g)",
			row.Step, DivergenceFactor, r.cfg.LR)
	}
	return nil
}

func (s *stepStats) add(row Row, m pipeline.StepMetrics) {
	if s.Steps == 0 {
		s.FirstLoss = row.Loss
	}
	s.Steps++
	if len(s.Recent) == finalLossWindow {
		s.Recent = s.Recent[1:]
	}
	s.Recent = append(s.Recent, row.Loss)
	s.Bytes += float64(m.BytesSent)
	s.DenseBytes += float64(m.DenseBytes)
	if imbalance := m.Extra[pipeline.PartitionImbalance]; imbalance > 0 {
		s.ImbalanceSeen++
		s.ImbalanceSum += imbalance
	}
	for name, v := range m.Extra {
		if name == pipeline.PartitionImbalance {
			continue // averaged above, over the steps that had one, into sparsity
		}
		if s.ExtraSum == nil {
			s.ExtraSum, s.ExtraSeen = map[string]float64{}, map[string]int{}
		}
		s.ExtraSum[name] += v
		s.ExtraSeen[name]++
	}
	if m.HasDensity {
		s.DensitySeen++
		s.DensitySum += m.DensityAchieved
		s.MissingSum += float64(m.TensorsMissing)
	}
	if s.Steps == 1 {
		return
	}
	s.Timed++
	s.TimedSecs += row.StepMS.Total / 1000
	s.Samples += row.Samples
	s.Ms.Total += row.StepMS.Total
	s.Ms.Compute += row.StepMS.Compute
	s.Ms.Sparsify += row.StepMS.Sparsify
	s.Ms.Comm += row.StepMS.Comm
	s.Ms.Wait += row.StepMS.Wait
}

func (r *run) summarize(trainErr error) *Summary {
	st := &r.stats
	s := &Summary{
		Config: *r.cfg, Pipeline: r.cfg.Pipeline, Model: r.cfg.Model, Dataset: r.cfg.Dataset,
		Workers: r.world, Parameters: r.numParams(), Steps: r.step, Epochs: r.epochsDone(0),
		WallSeconds: time.Since(r.start).Seconds(), Complete: trainErr == nil, ConfigChanges: r.changes, ResultsVersion: ResultsVersion,
		Provenance: r.origin,
	}
	if trainErr != nil {
		s.Error = trainErr.Error()
	}
	if r.lastRes != nil {
		s.Eval = *r.lastRes
	}
	if st.Steps > 0 {
		first := st.FirstLoss
		final := 0.0
		for _, l := range st.Recent {
			final += l
		}
		final /= float64(len(st.Recent))
		s.InitialLoss, s.FinalLoss = &first, &final
		bytes, dense := st.Bytes/float64(st.Steps), st.DenseBytes/float64(st.Steps)
		s.Traffic = Traffic{BytesSentPerStep: &bytes, DenseBytesPerStep: &dense}
	}
	if st.Timed > 0 {
		n := float64(st.Timed)
		s.Throughput = Throughput{
			SamplesPerS: float64(st.Samples) / st.TimedSecs,
			StepMS: StepMS{Total: st.Ms.Total / n, Compute: st.Ms.Compute / n, Sparsify: st.Ms.Sparsify / n,
				Comm: st.Ms.Comm / n, Wait: st.Ms.Wait / n},
		}
	}
	s.Sparsity.Tensors = len(r.params)
	if st.DensitySeen > 0 {
		achieved, missing := st.DensitySum/float64(st.DensitySeen), st.MissingSum/float64(st.DensitySeen)
		s.Sparsity.DensityAchieved, s.Sparsity.TensorsMissingPerStep = &achieved, &missing
		// A pipeline that does not read the density (PowerSGD's rank sets its size) has
		// no target to report.
		if spec, err := pipelines.Lookup(r.cfg.Pipeline); err == nil && spec.ReadsKey("density") {
			target := r.cfg.Density
			s.Sparsity.DensityTarget = &target
		}
	}
	if st.ImbalanceSeen > 0 {
		imbalance := st.ImbalanceSum / float64(st.ImbalanceSeen)
		s.Sparsity.PartitionImbalance = &imbalance
	}
	for name, sum := range st.ExtraSum {
		if s.Extra == nil {
			s.Extra = map[string]float64{}
		}
		s.Extra[name] = sum / float64(st.ExtraSeen[name])
	}
	s.Consistency.ParamChecksum = fmt.Sprintf("%016x", checksum(r.params))
	if r.checks.Checks > 0 {
		equal := r.checks.Equal
		s.Consistency.ParamChecksumEqual = &equal
	}
	return s
}
