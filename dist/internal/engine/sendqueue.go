package engine

// sendQueue holds the frames waiting for a link's writer, one FIFO per collective, served
// round-robin: a large collective cannot starve a small one queued after it, which is
// what lets concurrent collectives overlap rather than run one after the other.
type sendQueue struct {
	order []uint64 // collectives with queued frames
	byseq map[uint64][]*outFrame
	next  int
}

func (q *sendQueue) push(f *outFrame) {
	if q.byseq == nil {
		q.byseq = make(map[uint64][]*outFrame)
	}
	s := f.h.seq
	fs, ok := q.byseq[s]
	if !ok {
		q.order = append(q.order, s)
	}
	q.byseq[s] = append(fs, f)
}

func (q *sendQueue) pop() *outFrame {
	if len(q.order) == 0 {
		return nil
	}
	if q.next >= len(q.order) {
		q.next = 0
	}
	s := q.order[q.next]
	fs := q.byseq[s]
	f := fs[0]
	fs[0] = nil
	if fs = fs[1:]; len(fs) == 0 {
		delete(q.byseq, s)
		q.order = append(q.order[:q.next], q.order[q.next+1:]...)
	} else {
		q.byseq[s] = fs
		q.next++
	}
	return f
}

func (q *sendQueue) drain() []*outFrame {
	var all []*outFrame
	for _, s := range q.order {
		all = append(all, q.byseq[s]...)
	}
	q.order, q.byseq, q.next = nil, nil, 0
	return all
}
