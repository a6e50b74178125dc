//go:build !linux

package simcluster

import "errors"

func inNetns(string, func() error) error {
	return errors.New("simcluster: network namespaces need Linux")
}
