package configs

import "embed"

// RBAC holds the bootstrap RBAC policy the API server applies before it reports ready: ClusterRoles,
// Roles and their bindings for the admin group, for every user's basics, and one identity per rayctl
// component (kubelet, scheduler, controllers, garbage collector, DNS, NetworkPolicy enforcer), one or more YAML documents per
// file, as rbac/<name>.yaml.
//
//go:embed rbac/*.yaml
var RBAC embed.FS
