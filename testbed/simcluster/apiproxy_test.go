// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

package simcluster

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// TestAPIProxyPartition: forwarding, then a cut that leaves connections silent (timeouts,
// not refusals or closes), then a heal that closes what was held and forwards again.
func TestAPIProxyPartition(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	p, err := startAPIProxy("127.0.0.1:0", echo.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	roundTrip := func(c net.Conn) error {
		if _, err := c.Write([]byte("ping\n")); err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err == nil && line != "ping\n" {
			return errors.New("echoed " + line)
		}
		return err
	}
	dial := func() net.Conn {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	before := dial()
	if err := roundTrip(before); err != nil {
		t.Fatalf("forwarding: %v", err)
	}
	p.Cut()
	if err := roundTrip(before); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("an open connection during the cut: want silence (a timeout), got %v", err)
	}
	during := dial()
	if err := roundTrip(during); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a new connection during the cut: want silence (a timeout), got %v", err)
	}
	p.Heal()
	for name, c := range map[string]net.Conn{"opened before the cut": before, "opened during the cut": during} {
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Errorf("after the heal, the connection %s must be closed: %v", name, err)
		}
	}
	if err := roundTrip(dial()); err != nil {
		t.Fatalf("forwarding after the heal: %v", err)
	}
}
