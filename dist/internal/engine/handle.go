package engine

// handle implements dist.Handle and dist.GatherHandle.
type Handle struct {
	done chan struct{}
	out  [][]byte
	err  error
}

func NewHandle() *Handle { return &Handle{done: make(chan struct{})} }

func FailedHandle(err error) *Handle {
	h := NewHandle()
	h.Finish(nil, err)
	return h
}

func (h *Handle) Finish(out [][]byte, err error) {
	h.out, h.err = out, err
	close(h.done)
}

func (h *Handle) Wait() error {
	<-h.done
	return h.err
}

// GatherHandle adapts handle to dist.GatherHandle, whose Wait has another signature.
type GatherHandle struct{ *Handle }

func (g GatherHandle) Wait() ([][]byte, error) {
	<-g.done
	return g.out, g.err
}
