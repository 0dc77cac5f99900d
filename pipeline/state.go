package pipeline

// State is what a pipeline carries from one step to the next, which a checkpoint must keep
// for a resumed run to continue exactly as an uninterrupted one: the step count (behind
// density warm-up) and each tensor's error-feedback memory. It belongs to one rank: every
// rank's residuals differ.
type State struct {
	Steps     int64
	Order     []int       // the backprop order the ranks agreed on; nil before the first step, or for a pipeline that needs none
	Residuals [][]float32 // by tensor id; nil for a tensor without memory
	Momenta   [][]float32 // by tensor id, with DGC momentum correction only
	// Extra is the state of a pipeline that keeps more than error-feedback memory between
	// steps (ExDyna: its threshold and partition boundaries), encoded by the pipeline; nil
	// for the others.
	Extra []byte
}

// Stateful is a Pipeline whose state outlives a step. Pipelines that are not Stateful (the
// dense ones) start every step afresh.
type Stateful interface {
	// State returns a copy of the pipeline's state between steps.
	State() (State, error)
	// Restore replaces the state of a pipeline that has not yet run a step.
	Restore(State) error
}
