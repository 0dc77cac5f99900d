package trainer

import (
	"fmt"
	"time"

	"github.com/ssfusion/ssfusion/pipeline"
)

// finalLossWindow is how many last steps final_loss averages: one step's loss is too noisy to
// compare runs by.
const finalLossWindow = 20

// stepStats accumulates the per-step figures that summary.json averages. The first step is
// kept out of the timing averages: it pays one-off allocations and warm-up.
type stepStats struct {
	steps       int
	firstLoss   float64
	recent      []float64
	timed       int
	timedSecs   float64
	samples     int
	ms          StepMS
	bytes       float64
	denseBytes  float64
	densitySum  float64
	missingSum  float64
	densitySeen int
}

func (s *stepStats) add(row Row, m pipeline.StepMetrics) {
	if s.steps == 0 {
		s.firstLoss = row.Loss
	}
	s.steps++
	if len(s.recent) == finalLossWindow {
		s.recent = s.recent[1:]
	}
	s.recent = append(s.recent, row.Loss)
	s.bytes += float64(m.BytesSent)
	s.denseBytes += float64(m.DenseBytes)
	if m.HasDensity {
		s.densitySeen++
		s.densitySum += m.DensityAchieved
		s.missingSum += float64(m.TensorsMissing)
	}
	if s.steps == 1 {
		return
	}
	s.timed++
	s.timedSecs += row.StepMS.Total / 1000
	s.samples += row.Samples
	s.ms.Total += row.StepMS.Total
	s.ms.Compute += row.StepMS.Compute
	s.ms.Sparsify += row.StepMS.Sparsify
	s.ms.Comm += row.StepMS.Comm
	s.ms.Wait += row.StepMS.Wait
}

func (r *run) summarize(trainErr error) *Summary {
	st := &r.stats
	s := &Summary{
		Config: *r.cfg, Pipeline: r.cfg.Pipeline, Model: r.cfg.Model, Dataset: r.cfg.Dataset,
		Workers: r.world, Parameters: r.numParams(), Steps: r.step, Epochs: r.epochsDone(0),
		WallSeconds: time.Since(r.start).Seconds(), Complete: trainErr == nil,
	}
	if trainErr != nil {
		s.Error = trainErr.Error()
	}
	if r.lastRes != nil {
		s.Eval = *r.lastRes
	}
	if st.steps > 0 {
		first := st.firstLoss
		final := 0.0
		for _, l := range st.recent {
			final += l
		}
		final /= float64(len(st.recent))
		s.InitialLoss, s.FinalLoss = &first, &final
		bytes, dense := st.bytes/float64(st.steps), st.denseBytes/float64(st.steps)
		s.Traffic = Traffic{BytesSentPerStep: &bytes, DenseBytesPerStep: &dense}
	}
	if st.timed > 0 {
		n := float64(st.timed)
		s.Throughput = Throughput{
			SamplesPerS: float64(st.samples) / st.timedSecs,
			StepMS: StepMS{Total: st.ms.Total / n, Compute: st.ms.Compute / n, Sparsify: st.ms.Sparsify / n,
				Comm: st.ms.Comm / n, Wait: st.ms.Wait / n},
		}
	}
	s.Sparsity.Tensors = len(r.params)
	if st.densitySeen > 0 {
		target := r.cfg.Density
		achieved, missing := st.densitySum/float64(st.densitySeen), st.missingSum/float64(st.densitySeen)
		s.Sparsity.DensityTarget, s.Sparsity.DensityAchieved, s.Sparsity.TensorsMissingPerStep = &target, &achieved, &missing
	}
	s.Consistency.ParamChecksum = fmt.Sprintf("%016x", checksum(r.params))
	if r.checks.checks > 0 {
		equal := r.checks.equal
		s.Consistency.ParamChecksumEqual = &equal
	}
	return s
}
