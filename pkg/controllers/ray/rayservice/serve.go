package rayservice

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"github.com/rayctl/rayctl/pkg/raydashboard"
)

// serveConfigJSON turns spec.serveConfigV2 (YAML) into the JSON body of PUT /api/serve/applications/.
// The config must be a YAML mapping (Ray's ServeDeploySchema: applications, http_options, …).
func serveConfigJSON(v2 string) ([]byte, error) {
	if strings.TrimSpace(v2) == "" {
		return nil, fmt.Errorf("spec.serveConfigV2 is empty")
	}
	var m map[string]any
	if err := yaml.Unmarshal([]byte(v2), &m); err != nil {
		return nil, fmt.Errorf("spec.serveConfigV2 is not a YAML mapping: %w", err)
	}
	if m == nil {
		return nil, fmt.Errorf("spec.serveConfigV2 is not a YAML mapping")
	}
	return yaml.YAMLToJSON([]byte(v2))
}

// appStatuses maps Ray's answer to RayService status: one AppStatus per application (the unnamed
// one as "default") with its deployments. ready is true when there is at least one application and
// every one is RUNNING: only then may traffic go to the cluster.
func appStatuses(d *raydashboard.ServeDetails) (ready bool, apps map[string]rayv1.AppStatus) {
	if d == nil || len(d.Applications) == 0 {
		return false, nil
	}
	ready = true
	apps = make(map[string]rayv1.AppStatus, len(d.Applications))
	for name, a := range d.Applications {
		if name == "" {
			name = DefaultAppName
		}
		st := rayv1.AppStatus{Status: a.Status, Message: a.Message, Deployments: map[string]rayv1.ServeDeploymentStatus{}}
		for dn, dep := range a.Deployments {
			st.Deployments[dn] = rayv1.ServeDeploymentStatus{Status: dep.Status, Message: dep.Message}
		}
		if a.Status != rayv1.ApplicationStatusEnum.RUNNING {
			ready = false
		}
		apps[name] = st
	}
	return ready, apps
}

// appsSummary lists applications and their status, e.g. "app1=RUNNING, app2=DEPLOYING".
func appsSummary(apps map[string]rayv1.AppStatus) string {
	names := make([]string, 0, len(apps))
	for n := range apps {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, n+"="+apps[n].Status)
	}
	return strings.Join(parts, ", ")
}

// needsDeploy decides whether the config is PUT to a cluster: nothing deployed there yet (by this
// controller process), the cluster lost its applications (a head restart without GCS fault
// tolerance), or the config changed since the last deploy.
func needsDeploy(deployed, current string, apps map[string]rayv1.AppStatus) (bool, string) {
	switch {
	case deployed == "":
		return true, "no Serve config deployed to the cluster yet"
	case len(apps) == 0:
		return true, "the cluster reports no Serve application (its head may have restarted)"
	case deployed != current:
		return true, "spec.serveConfigV2 differs from the config deployed last"
	}
	return false, ""
}

// deployedConfigs remembers, per RayService (by UID) and cluster, the serveConfigV2 last deployed,
// as KubeRay's cache does; a controller restart forgets it and deploys once more (harmless: Ray
// applies the same config as a no-op).
type deployedConfigs struct {
	mu sync.Mutex
	m  map[types.UID]map[string]string
}

func (c *deployedConfigs) get(uid types.UID, cluster string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[uid][cluster]
}

func (c *deployedConfigs) set(uid types.UID, cluster, config string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[types.UID]map[string]string{}
	}
	if c.m[uid] == nil {
		c.m[uid] = map[string]string{}
	}
	c.m[uid][cluster] = config
}

// keep forgets the clusters of uid other than those named (all of them when none is named).
func (c *deployedConfigs) keep(uid types.UID, clusters ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(clusters) == 0 {
		delete(c.m, uid)
		return
	}
	for name := range c.m[uid] {
		found := false
		for _, k := range clusters {
			found = found || (k != "" && k == name)
		}
		if !found {
			delete(c.m[uid], name)
		}
	}
}
