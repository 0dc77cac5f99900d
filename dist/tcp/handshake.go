package tcp

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"net"

	"github.com/ssfusion/ssfusion/dist"
)

// Every connection starts with a handshake in which both sides prove they hold the job's
// token without sending it (HMAC-SHA256 over fresh nonces), and the dialer names its
// rank:
//
//	acceptor -> dialer: magic(8) nonceA(16)
//	dialer -> acceptor: magic(8) rank(4) size(4) nonceD(16) HMAC(token, "dial"|nonceA|nonceD|rank|size)(32)
//	acceptor -> dialer: status(1) 0(3) rank(4) HMAC(token, "accept"|nonceD|nonceA|rank|dialer rank)(32)
//
// The token keeps stray processes and other jobs out; it is not meant to stop an attacker
// who can read the traffic, which is not encrypted.
const (
	hsMagic    = "SSFDIST1"
	hsNonce    = 16
	hsMAC      = sha256.Size
	hsHello    = len(hsMagic) + hsNonce
	hsDial     = len(hsMagic) + 8 + hsNonce + hsMAC
	hsVerdict  = 8 + hsMAC
	maxAddrLen = 512
)

type hsStatus uint8

const (
	hsOK hsStatus = iota
	hsBadToken
	hsBadSize
	hsBadRank
	hsDupRank
)

func (s hsStatus) String() string {
	switch s {
	case hsOK:
		return "accepted"
	case hsBadToken:
		return "wrong job token (SSF_JOB_TOKEN must be the same on every rank)"
	case hsBadSize:
		return "world size differs from the job's (WORLD_SIZE must be the same on every rank)"
	case hsBadRank:
		return "this rank is not expected on this connection"
	case hsDupRank:
		return "another process already joined with this rank"
	}
	return fmt.Sprintf("status %d", uint8(s))
}

func hsSum(token string, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, []byte(token))
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

func u32(v int) []byte { return binary.LittleEndian.AppendUint32(nil, uint32(v)) }

// acceptHandshake runs the acceptor's side and returns the dialer's rank. claim decides
// whether that rank may join here. A rejected dialer is told why before the error returns.
func acceptHandshake(conn net.Conn, self, size int, token string, claim func(rank int) hsStatus) (int, error) {
	hello := make([]byte, hsHello)
	copy(hello, hsMagic)
	nonceA := hello[len(hsMagic):]
	rand.Read(nonceA)
	if _, err := conn.Write(hello); err != nil {
		return -1, fmt.Errorf("handshake: %w", err)
	}
	msg := make([]byte, hsDial)
	if _, err := io.ReadFull(conn, msg); err != nil {
		return -1, fmt.Errorf("handshake: %w (not a dist peer?)", err)
	}
	if string(msg[:len(hsMagic)]) != hsMagic {
		return -1, fmt.Errorf("%w: not a dist peer (bad handshake magic %q)", dist.ErrRejected, msg[:len(hsMagic)])
	}
	p := msg[len(hsMagic):]
	rank := int(binary.LittleEndian.Uint32(p))
	peerSize := int(binary.LittleEndian.Uint32(p[4:]))
	nonceD, mac := p[8:8+hsNonce], p[8+hsNonce:]
	status := hsOK
	switch {
	case !hmac.Equal(mac, hsSum(token, []byte("dial"), nonceA, nonceD, p[:4], p[4:8])):
		status = hsBadToken
	case peerSize != size:
		status = hsBadSize
	default:
		status = claim(rank)
	}
	verdict := make([]byte, 8, hsVerdict)
	verdict[0] = byte(status)
	binary.LittleEndian.PutUint32(verdict[4:], uint32(self))
	if status == hsOK {
		verdict = append(verdict, hsSum(token, []byte("accept"), nonceD, nonceA, u32(self), p[:4])...)
	} else {
		verdict = append(verdict, make([]byte, hsMAC)...)
	}
	_, err := conn.Write(verdict)
	if status != hsOK {
		return -1, fmt.Errorf("%w: claimed rank %d: %v", dist.ErrRejected, rank, status)
	}
	if err != nil {
		return -1, fmt.Errorf("handshake: %w", err)
	}
	return rank, nil
}

// dialHandshake runs the dialer's side: it presents rank self and checks that the
// acceptor holds the token and is rank expect.
func dialHandshake(conn net.Conn, self, size, expect int, token string) error {
	remote := conn.RemoteAddr()
	hello := make([]byte, hsHello)
	if _, err := io.ReadFull(conn, hello); err != nil {
		return fmt.Errorf("handshake with %v: %w", remote, err)
	}
	if string(hello[:len(hsMagic)]) != hsMagic {
		return fmt.Errorf("%v is not a dist peer (bad handshake magic)", remote)
	}
	nonceA := hello[len(hsMagic):]
	msg := make([]byte, 0, hsDial)
	msg = append(msg, hsMagic...)
	msg = append(msg, u32(self)...)
	msg = append(msg, u32(size)...)
	nonceD := make([]byte, hsNonce)
	rand.Read(nonceD)
	msg = append(msg, nonceD...)
	msg = append(msg, hsSum(token, []byte("dial"), nonceA, nonceD, u32(self), u32(size))...)
	if _, err := conn.Write(msg); err != nil {
		return fmt.Errorf("handshake with %v: %w", remote, err)
	}
	verdict := make([]byte, hsVerdict)
	if _, err := io.ReadFull(conn, verdict); err != nil {
		return fmt.Errorf("handshake with %v: %w", remote, err)
	}
	if s := hsStatus(verdict[0]); s != hsOK {
		return fmt.Errorf("%v rejected rank %d: %w: %v", remote, self, dist.ErrRejected, s)
	}
	peer := int(binary.LittleEndian.Uint32(verdict[4:]))
	if !hmac.Equal(verdict[8:], hsSum(token, []byte("accept"), nonceD, nonceA, verdict[4:8], u32(self))) {
		return fmt.Errorf("%v: %w: the peer does not hold the job token", remote, dist.ErrRejected)
	}
	if peer != expect {
		return fmt.Errorf("%v is rank %d, expected rank %d", remote, peer, expect)
	}
	return nil
}

// writeString and readString carry a length-prefixed address.
func writeString(w io.Writer, s string) error {
	if len(s) > maxAddrLen {
		return fmt.Errorf("address %q is longer than %d bytes", s, maxAddrLen)
	}
	b := binary.LittleEndian.AppendUint16(nil, uint16(len(s)))
	_, err := w.Write(append(b, s...))
	return err
}

func readString(r io.Reader) (string, error) {
	var n [2]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return "", err
	}
	l := int(binary.LittleEndian.Uint16(n[:]))
	if l > maxAddrLen {
		return "", fmt.Errorf("%w: address of %d bytes exceeds the limit of %d", dist.ErrProtocol, l, maxAddrLen)
	}
	b := make([]byte, l)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return string(b), nil
}
