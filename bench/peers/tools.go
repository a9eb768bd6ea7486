//go:build tools

// Package peers pins the peer control planes `make bench` runs beside rayctl: kube-apiserver of
// k8s.io/kubernetes at the Kubernetes version rayctl reports, its staging modules at their published
// versions (the module's own go.mod points them at its source tree, which the module proxy does not hold).
package peers

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
