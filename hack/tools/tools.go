//go:build tools

// Package tools pins the code generators used by hack/generate.sh.
// It is never built into rayctl; the blank imports only keep the
// generator modules (and their versions) in this module's go.mod.
package tools

import (
	_ "k8s.io/kube-openapi/cmd/openapi-gen"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
