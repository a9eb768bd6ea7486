// Package defaults fills in the fields that a real Kubernetes API server
// defaults for the built-in kinds rayctl serves (the v1 defaulting rules of
// k8s.io/kubernetes pkg/apis/*/v1, written here against the external
// k8s.io/api types).
//
// Each SetXDefaults function is idempotent and only touches unset fields, so
// it is safe to run on every decode. RegisterDefaults installs all of them in
// a runtime.Scheme so the API server's codecs apply them to requests and to
// objects read back from storage.
//
// Two things real Kubernetes does outside defaulting are offered here as
// well, for the registry strategies to call: SetJobSelector (the Job
// strategy's selector generation, which needs the UID) and the pod's
// serviceAccountName "default" (done by the ServiceAccount admission plugin
// in a real cluster).
package defaults
