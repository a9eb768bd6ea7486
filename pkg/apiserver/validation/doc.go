// Package validation checks the built-in Kubernetes kinds served by rayctl's
// embedded API server.
//
// The checks are written directly against the external k8s.io/api types (the
// server registers the v1 types as their own internal version) and return
// field.ErrorLists whose paths follow the real API server's, so that a client
// sees the same HTTP 422 answer it would get from a real cluster, e.g.
//
//	Pod "x" is invalid: spec.containers[0].image: Required value
//
// The validators expect objects that have already been defaulted (see
// package defaults): fields that defaulting always fills in, such as a
// container's imagePullPolicy or a service port's protocol, are reported as
// required when empty, exactly as a real cluster would report them.
//
// Every ValidateX function includes the metadata checks for its kind (name
// rule, namespace scope, labels, annotations, owner references, finalizers);
// every ValidateXUpdate function includes the metadata update rules and the
// checks of the new object.
package validation
