package tcp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/ssfusion/ssfusion/dist"
)

// rendezvous forms the full mesh of a TCP job (see Dial) for one rank.
type rendezvous struct {
	cfg Config
	log *slog.Logger
}

func (rv *rendezvous) errorf(format string, args ...any) error {
	return fmt.Errorf("dist: rank %d: rendezvous: "+format, append([]any{rv.cfg.Rank}, args...)...)
}

func (rv *rendezvous) run(ctx context.Context) (conns []net.Conn, err error) {
	cfg := rv.cfg
	conns = make([]net.Conn, cfg.Size)
	defer func() {
		if err != nil {
			for _, c := range conns {
				if c != nil {
					c.Close()
				}
			}
		}
	}()

	var ln net.Listener
	switch {
	case cfg.Rank == 0 && cfg.Listener != nil:
		ln = cfg.Listener
	case cfg.Rank == 0:
		_, port, _ := net.SplitHostPort(cfg.MasterAddr)
		if ln, err = net.Listen("tcp", net.JoinHostPort(cfg.BindAddr, port)); err != nil {
			return nil, rv.errorf("listen for the other ranks: %w", err)
		}
	case cfg.Rank < cfg.Size-1:
		if ln, err = net.Listen("tcp", net.JoinHostPort(cfg.BindAddr, "0")); err != nil {
			return nil, rv.errorf("listen for higher ranks: %w", err)
		}
	}
	if ln != nil {
		defer ln.Close()
		stop := context.AfterFunc(ctx, func() { ln.Close() })
		defer stop()
	}

	if cfg.Rank == 0 {
		got, err := rv.accept(ctx, ln, func(r int) bool { return r > 0 }, cfg.Size-1, true)
		if err != nil {
			return nil, err
		}
		table := binary.LittleEndian.AppendUint32(nil, uint32(cfg.Size))
		for r := range cfg.Size {
			table = binary.LittleEndian.AppendUint16(table, uint16(len(got[r].addr)))
			table = append(table, got[r].addr...)
		}
		for r := 1; r < cfg.Size; r++ {
			conns[r] = got[r].conn
		}
		deadline, _ := ctx.Deadline()
		for r := 1; r < cfg.Size; r++ {
			conns[r].SetWriteDeadline(deadline)
			if _, err := conns[r].Write(table); err != nil {
				return nil, rv.errorf("send the address table to rank %d: %w", r, err)
			}
			conns[r].SetWriteDeadline(time.Time{})
		}
		return conns, nil
	}

	c0, err := rv.dial(ctx, cfg.MasterAddr, 0)
	if err != nil {
		return nil, err
	}
	conns[0] = c0
	adv := ""
	if ln != nil {
		adv = rv.advertise(ln, c0)
	}
	deadline, _ := ctx.Deadline()
	c0.SetDeadline(deadline)
	if err := writeString(c0, adv); err != nil {
		return nil, rv.errorf("send address to rank 0: %w", err)
	}
	addrs, err := readTable(c0, cfg.Size)
	if err != nil {
		return nil, rv.errorf("address table from rank 0 (did every rank start?): %w", err)
	}
	c0.SetDeadline(time.Time{})

	// Accept the ranks above while dialling the ones below: every pair connects, the
	// higher rank dialling, and no rank waits on one that waits on it.
	var (
		wg        sync.WaitGroup
		above     map[int]accepted
		acceptErr error
	)
	if ln != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			above, acceptErr = rv.accept(ctx, ln, func(r int) bool { return r > cfg.Rank }, cfg.Size-1-cfg.Rank, false)
		}()
	}
	var dialErr error
	for j := 1; j < cfg.Rank; j++ {
		c, err := rv.dial(ctx, addrs[j], j)
		if err != nil {
			dialErr = err
			break
		}
		conns[j] = c
	}
	if dialErr != nil && ln != nil {
		ln.Close() // ends the accept loop early
	}
	wg.Wait()
	for r, a := range above {
		conns[r] = a.conn
	}
	if dialErr != nil {
		return nil, dialErr
	}
	if acceptErr != nil {
		return nil, acceptErr
	}
	return conns, nil
}

// advertise returns the address peers should dial to reach ln.
func (rv *rendezvous) advertise(ln net.Listener, c0 net.Conn) string {
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	switch ip := net.ParseIP(host); {
	case rv.cfg.AdvertiseAddr != "":
		host = rv.cfg.AdvertiseAddr
	case ip == nil || ip.IsUnspecified():
		host, _, _ = net.SplitHostPort(c0.LocalAddr().String())
	}
	return net.JoinHostPort(host, port)
}

func readTable(r io.Reader, size int) ([]string, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	if got := int(binary.LittleEndian.Uint32(n[:])); got != size {
		return nil, fmt.Errorf("%w: table of %d ranks, want %d", dist.ErrProtocol, got, size)
	}
	addrs := make([]string, size)
	for i := range addrs {
		s, err := readString(r)
		if err != nil {
			return nil, err
		}
		addrs[i] = s
	}
	return addrs, nil
}

// dial connects to rank expect at addr, retrying while the address refuses (the peer
// may not listen yet), and runs the handshake.
func (rv *rendezvous) dial(ctx context.Context, addr string, expect int) (net.Conn, error) {
	cfg := rv.cfg
	var d net.Dialer
	backoff := 10 * time.Millisecond
	for {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			// Rank 0's listener can be open before rank 0 accepts on it (a launcher
			// opened it and handed it over): the connection then waits in the backlog,
			// and rank 0's greeting may come as late as the end of the rendezvous.
			deadline := time.Now().Add(handshakeTimeout)
			if d, ok := ctx.Deadline(); ok && (expect == 0 || d.Before(deadline)) {
				deadline = d
			}
			conn.SetDeadline(deadline)
			if err := dialHandshake(conn, cfg.Rank, cfg.Size, expect, cfg.Token); err != nil {
				conn.Close()
				return nil, fmt.Errorf("dist: rank %d: joining rank %d: %w", cfg.Rank, expect, err)
			}
			conn.SetDeadline(time.Time{})
			return conn, nil
		}
		if ctx.Err() != nil {
			return nil, rv.errorf("cannot reach rank %d at %s: %v", expect, addr, err)
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil, rv.errorf("cannot reach rank %d at %s: %v", expect, addr, err)
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

type accepted struct {
	conn net.Conn
	addr string
}

// accept takes authenticated connections on ln until count ranks for which want is true
// have joined. Connections without the token, with a wrong world size, or claiming a
// rank that is not expected or already taken are logged with their remote address and
// closed; the job goes on. It closes ln before returning.
func (rv *rendezvous) accept(ctx context.Context, ln net.Listener, want func(int) bool, count int, withAddr bool) (map[int]accepted, error) {
	cfg := rv.cfg
	var (
		mu       sync.Mutex
		claimed  = make(map[int]bool)
		inflight = make(map[net.Conn]bool)
		finished bool
		wg       sync.WaitGroup
	)
	claim := func(r int) hsStatus {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r < 0 || r >= cfg.Size || !want(r):
			return hsBadRank
		case claimed[r]:
			return hsDupRank
		}
		claimed[r] = true
		return hsOK
	}
	results := make(chan struct {
		rank int
		a    accepted
	})
	quit := make(chan struct{})
	acceptErr := make(chan error, 1)

	handle := func(conn net.Conn) {
		defer wg.Done()
		defer func() {
			mu.Lock()
			delete(inflight, conn)
			mu.Unlock()
		}()
		deadline := time.Now().Add(handshakeTimeout)
		if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		conn.SetDeadline(deadline)
		r, err := acceptHandshake(conn, cfg.Rank, cfg.Size, cfg.Token, claim)
		var addr string
		if err == nil && withAddr {
			if addr, err = readString(conn); err != nil {
				mu.Lock()
				delete(claimed, r)
				mu.Unlock()
			}
		}
		if err != nil {
			rv.log.Warn("dist: rejected connection", "rank", cfg.Rank, "remote", conn.RemoteAddr().String(), "err", err.Error())
			conn.Close()
			return
		}
		conn.SetDeadline(time.Time{})
		mu.Lock()
		delete(inflight, conn) // ours now: the cleanup below must not close it
		mu.Unlock()
		select {
		case results <- struct {
			rank int
			a    accepted
		}{r, accepted{conn, addr}}:
		case <-quit:
			conn.Close()
		}
	}

	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				acceptErr <- err
				return
			}
			mu.Lock()
			if finished {
				mu.Unlock()
				conn.Close()
				continue
			}
			inflight[conn] = true
			wg.Add(1)
			mu.Unlock()
			go handle(conn)
		}
	}()

	got := make(map[int]accepted)
	var err error
	for len(got) < count && err == nil {
		select {
		case res := <-results:
			got[res.rank] = res.a
		case e := <-acceptErr:
			if ctx.Err() != nil {
				err = rv.missing(got, want, ctx.Err())
			} else {
				err = rv.errorf("accept: %w", e)
			}
		case <-ctx.Done():
			err = rv.missing(got, want, ctx.Err())
		}
	}
	close(quit)
	ln.Close()
	mu.Lock()
	finished = true
	for c := range inflight {
		c.Close()
	}
	mu.Unlock()
	wg.Wait()
	if err != nil {
		for _, a := range got {
			a.conn.Close()
		}
		return nil, err
	}
	return got, nil
}

func (rv *rendezvous) missing(got map[int]accepted, want func(int) bool, cause error) error {
	var miss []int
	for r := range rv.cfg.Size {
		if _, ok := got[r]; !ok && want(r) {
			miss = append(miss, r)
		}
	}
	slices.Sort(miss)
	if errors.Is(cause, context.DeadlineExceeded) {
		return rv.errorf("ranks %v did not connect within the dial timeout", miss)
	}
	return rv.errorf("ranks %v had not connected: %w", miss, cause)
}
