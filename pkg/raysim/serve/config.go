// Package serve is raysim's Ray Serve: the state behind the dashboard's Serve REST API
// (PUT/GET/DELETE /api/serve/applications/) and the HTTP proxy that answers on port 8000 for each
// application's route prefix. It runs no Python: an application is "deployed" once its config is
// accepted, goes DEPLOYING → RUNNING (its deployments UPDATING → HEALTHY) after a short while, and
// answers every request under its route prefix with a deterministic body:
//
//	raysim serve: app=<name> route=<prefix> path=<path>
//
// Configs are validated as Ray 2.60's ServeDeploySchema validates them (names, unique route
// prefixes, import paths, host/port only at the top level); a config Ray would refuse gets a 400 whose
// text names the field. Like Ray, a route prefix's form is not checked at deploy time.
package serve

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// DefaultAppName is the name of an application the config leaves unnamed.
const DefaultAppName = "default"

// Config is the part of Ray's ServeDeploySchema raysim reads.
type Config struct {
	// ProxyLocation is where proxies run (HeadOnly, EveryNode, Disabled).
	ProxyLocation string `json:"proxy_location,omitempty"`
	// HTTPOptions are the proxy's host and port.
	HTTPOptions *HTTPOptions `json:"http_options,omitempty"`
	// Applications are the applications to run; the ones not listed are deleted.
	Applications []AppConfig `json:"applications"`
	// TargetCapacity scales every deployment (0–100), as Ray does; raysim only reports it.
	TargetCapacity *float64 `json:"target_capacity,omitempty"`
}

// HTTPOptions are Serve's HTTP proxy options.
type HTTPOptions struct {
	// Host is the proxy's address (default 0.0.0.0).
	Host string `json:"host,omitempty"`
	// Port is the proxy's port (default 8000).
	Port *int `json:"port,omitempty"`
}

// AppConfig is one application of a config.
type AppConfig struct {
	// Name is unique in the config; empty means "default".
	Name string `json:"name"`
	// RoutePrefix is where the application answers HTTP; nil means "/".
	RoutePrefix *string `json:"route_prefix"`
	// ImportPath names the bound deployment ("module.submodule:app" or "module.app").
	ImportPath string `json:"import_path"`
	// Deployments override the code's deployment options; raysim reads their names and replicas.
	Deployments []DeploymentConfig `json:"deployments,omitempty"`
	// RuntimeEnv, Args and the rest are kept as given and shown back.
	RuntimeEnv map[string]any `json:"runtime_env,omitempty"`
	Args       map[string]any `json:"args,omitempty"`
}

// DeploymentConfig is one deployment's options.
type DeploymentConfig struct {
	// Name names the deployment.
	Name string `json:"name"`
	// NumReplicas is an integer or "auto"; nil means 1.
	NumReplicas any `json:"num_replicas,omitempty"`
	// UserConfig is passed to the deployment's reconfigure.
	UserConfig any `json:"user_config,omitempty"`
	// RayActorOptions are the replicas' resources (num_cpus …).
	RayActorOptions map[string]any `json:"ray_actor_options,omitempty"`
}

// ValidationError is a config Ray's schema refuses; its text names each field as pydantic does.
type ValidationError struct {
	// Errors are "location: message" lines.
	Errors []string
}

func (e *ValidationError) Error() string {
	n := len(e.Errors)
	s := "s"
	if n == 1 {
		s = ""
	}
	return fmt.Sprintf("%d validation error%s for ServeDeploySchema\n%s", n, s, strings.Join(e.Errors, "\n"))
}

// Parse reads and validates a config as PUT /api/serve/applications/ receives it.
func Parse(body []byte) (*Config, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, &ValidationError{Errors: []string{"(body)\n  Input should be a valid JSON object: " + err.Error()}}
	}
	var v ValidationError
	var rawApps []map[string]json.RawMessage
	if a, ok := raw["applications"]; ok {
		if err := json.Unmarshal(a, &rawApps); err != nil {
			v.Errors = append(v.Errors, "applications\n  Input should be a valid list of objects")
			return nil, &v
		}
	}
	for i, a := range rawApps {
		for _, key := range []string{"host", "port"} {
			if _, ok := a[key]; ok {
				v.Errors = append(v.Errors, fmt.Sprintf("applications.%d.%s\n  Value error, %s is set in the config for an application. Please remove it and set %s in the top level deploy config only.", i, key, key, key))
			}
		}
		if _, ok := a["import_path"]; !ok {
			v.Errors = append(v.Errors, fmt.Sprintf("applications.%d.import_path\n  Field required", i))
		}
	}
	var c Config
	if len(v.Errors) == 0 {
		if err := json.Unmarshal(body, &c); err != nil {
			return nil, &ValidationError{Errors: []string{"(body)\n  " + err.Error()}}
		}
	}
	names, routes := map[string]bool{}, map[string]bool{}
	for i := range c.Applications {
		a := &c.Applications[i]
		if a.Name == "" {
			if _, named := rawApps[i]["name"]; named {
				v.Errors = append(v.Errors, fmt.Sprintf("applications.%d.name\n  Value error, Application names must be nonempty.", i))
			}
			a.Name = DefaultAppName
		}
		if a.RoutePrefix == nil {
			if _, set := rawApps[i]["route_prefix"]; !set {
				root := "/"
				a.RoutePrefix = &root
			}
		}
		if msg := importPathError(a.ImportPath); msg != "" {
			v.Errors = append(v.Errors, fmt.Sprintf("applications.%d.import_path\n  Value error, %s", i, msg))
		}
		for j, d := range a.Deployments {
			if d.Name == "" {
				v.Errors = append(v.Errors, fmt.Sprintf("applications.%d.deployments.%d.name\n  Field required", i, j))
			}
			if n, ok := d.NumReplicas.(float64); ok && (n < 1 || n != float64(int(n))) {
				v.Errors = append(v.Errors, fmt.Sprintf("applications.%d.deployments.%d.num_replicas\n  Input should be a positive integer or \"auto\"", i, j))
			}
		}
		if names[a.Name] {
			v.Errors = append(v.Errors, fmt.Sprintf("applications\n  Value error, Found multiple configs for application %q. Please remove all duplicates.", a.Name))
		}
		names[a.Name] = true
		if a.RoutePrefix != nil {
			if routes[*a.RoutePrefix] {
				v.Errors = append(v.Errors, fmt.Sprintf("applications\n  Value error, Found duplicate applications for route prefix %q. Please ensure each application's route_prefix is unique.", *a.RoutePrefix))
			}
			routes[*a.RoutePrefix] = true
		}
	}
	if len(v.Errors) > 0 {
		return nil, &v
	}
	return &c, nil
}

// importPathError is what Ray says of a malformed import path ("" when it is well formed).
func importPathError(p string) string {
	if strings.Contains(p, ":") {
		switch {
		case strings.Count(p, ":") > 1:
			return fmt.Sprintf("Got invalid import path %q. An import path may have at most one colon.", p)
		case strings.HasPrefix(p, ":") || strings.HasSuffix(p, ":"):
			return fmt.Sprintf("Got invalid import path %q. An import path may not start or end with a colon.", p)
		}
		return ""
	}
	switch {
	case !strings.Contains(p, "."):
		return fmt.Sprintf("Got invalid import path %q. An import path must contain at least one dot or colon separating the module (and potentially submodules) from the deployment graph. E.g.: \"module.deployment_graph\".", p)
	case strings.HasPrefix(p, ".") || strings.HasSuffix(p, "."):
		return fmt.Sprintf("Got invalid import path %q. An import path may not start or end with a dot.", p)
	}
	return ""
}

// deploymentNames are the application's deployments: those its config names, else one named after
// the import path's attribute (the bound deployment).
func (a *AppConfig) deploymentNames() []string {
	if len(a.Deployments) > 0 {
		out := make([]string, 0, len(a.Deployments))
		for _, d := range a.Deployments {
			out = append(out, d.Name)
		}
		return out
	}
	p := a.ImportPath
	if i := strings.LastIndexAny(p, ":."); i >= 0 {
		p = p[i+1:]
	}
	return []string{p}
}

// replicas is a deployment's replica count (1 unless an integer is given).
func (d *DeploymentConfig) replicas() int {
	switch n := d.NumReplicas.(type) {
	case float64:
		return int(n)
	case string:
		if v, err := strconv.Atoi(n); err == nil && v > 0 {
			return v
		}
	}
	return 1
}
