package configs

import "embed"

// Samples holds the sample manifests users start from (a RayCluster and a RayJob per submission mode on
// raysim, and rayjob-real.yaml on real Ray),
// as samples/<name>.yaml; `rayctl demo` applies samples/rayjob-http.yaml.
//
//go:embed samples/*.yaml
var Samples embed.FS
