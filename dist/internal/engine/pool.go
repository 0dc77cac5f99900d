package engine

import (
	"math/bits"
	"sync"
)

// bufPool recycles frame payload buffers by power-of-two size class, so that a stream of
// segments does not allocate (and clear) one buffer per frame. Unlike a sync.Pool it
// survives garbage collections, which large training buffers trigger often; each class
// keeps at most poolKeep bytes. Each communicator has its own.
type bufPool struct {
	mu   sync.Mutex
	free [poolClasses][]*[]byte
}

const (
	poolMinShift = 10 // 1 KiB
	poolClasses  = 25 - poolMinShift
	poolKeep     = 16 << 20
)

// get returns a buffer of length n; n <= dist.MaxSegmentSize.
func (p *bufPool) get(n int) *[]byte {
	c := poolClass(n)
	p.mu.Lock()
	if l := len(p.free[c]); l > 0 {
		b := p.free[c][l-1]
		p.free[c] = p.free[c][:l-1]
		p.mu.Unlock()
		*b = (*b)[:n]
		return b
	}
	p.mu.Unlock()
	b := make([]byte, n, 1<<(c+poolMinShift))
	return &b
}

func (p *bufPool) put(b *[]byte) {
	if b == nil {
		return
	}
	c := poolClass(cap(*b))
	size := 1 << (c + poolMinShift)
	if cap(*b) != size {
		return
	}
	p.mu.Lock()
	if len(p.free[c]) < max(2, poolKeep/size) {
		p.free[c] = append(p.free[c], b)
	}
	p.mu.Unlock()
}

func poolClass(n int) int {
	if n <= 1<<poolMinShift {
		return 0
	}
	return bits.Len(uint(n-1)) - poolMinShift
}
