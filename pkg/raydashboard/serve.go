package raydashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// ServeApplicationsPath is the Serve REST API's resource: PUT deploys a whole
// config (every application), GET reads the applications' status, DELETE
// shuts Serve down.
const ServeApplicationsPath = "/api/serve/applications/"

// ServeDetails is the part of GET /api/serve/applications/ the controllers read.
type ServeDetails struct {
	// Applications maps each application's name to its status.
	Applications map[string]ServeApplication `json:"applications"`
}

// ServeApplication is one application's status.
type ServeApplication struct {
	// Name is the application's name.
	Name string `json:"name"`
	// RoutePrefix is where its ingress deployment answers HTTP.
	RoutePrefix *string `json:"route_prefix"`
	// Status is NOT_STARTED, DEPLOYING, RUNNING, DEPLOY_FAILED, DELETING or UNHEALTHY.
	Status string `json:"status"`
	// Message explains the status (why a deploy failed, say).
	Message string `json:"message"`
	// Deployments maps each deployment's name to its status.
	Deployments map[string]ServeDeployment `json:"deployments"`
}

// ServeDeployment is one deployment's status.
type ServeDeployment struct {
	// Name is the deployment's name.
	Name string `json:"name"`
	// Status is UPDATING, HEALTHY, UNHEALTHY (and in newer Rays UPSCALING, DOWNSCALING).
	Status string `json:"status"`
	// Message explains the status.
	Message string `json:"message"`
}

// GetServeApplications reads the Serve applications' status.
func (c *Client) GetServeApplications(ctx context.Context) (*ServeDetails, error) {
	var d ServeDetails
	if err := c.do(ctx, http.MethodGet, ServeApplicationsPath, nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// DeployServeConfig PUTs a Serve config (JSON, the shape of Ray's
// ServeDeploySchema) to the dashboard. A config Ray refuses is an *HTTPError
// whose body says why.
func (c *Client) DeployServeConfig(ctx context.Context, configJSON []byte) error {
	if !json.Valid(configJSON) {
		return fmt.Errorf("the Serve config is not JSON")
	}
	return c.do(ctx, http.MethodPut, ServeApplicationsPath, json.RawMessage(configJSON), nil)
}

// ProxyHealthy asks the Serve HTTP proxy this client was made for (New with
// the proxy's http://host:port) whether it is healthy: GET /-/healthz answering
// 200. A node without a proxy refuses the connection.
func (c *Client) ProxyHealthy(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/-/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK {
		return &HTTPError{Method: http.MethodGet, Path: "/-/healthz", Code: resp.StatusCode, Body: string(bytes.TrimSpace(body))}
	}
	return nil
}
