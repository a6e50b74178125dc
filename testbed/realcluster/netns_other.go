// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package realcluster

import (
	"errors"
	"net"
	"runtime"
	"time"
)

func dialLocked(string, string, string, time.Duration) (net.Conn, error) {
	runtime.UnlockOSThread()
	return nil, errors.New("realcluster: network namespaces need Linux")
}
