//go:build !linux

package netpolicy

import "errors"

func openWriter(string) (writer, error) {
	return nil, errors.New("NetworkPolicies are enforced with nftables, on Linux only")
}
