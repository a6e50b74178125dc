// Copyright The netpulse Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package simcluster

import "errors"

func inNetns(string, func() error) error {
	return errors.New("simcluster: network namespaces need Linux")
}
