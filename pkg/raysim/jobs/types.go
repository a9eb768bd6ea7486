// Package jobs implements raysim's side of the Ray Jobs API: the job records
// (with Ray's JSON field names and status values), a manager that runs each
// job's entrypoint as a shell command on the head once the cluster has the
// resources it asks for, and an HTTP client for the dashboard's /api/jobs/.
package jobs

import (
	"encoding/json"
	"fmt"
)

// Status is a job's state, with Ray's values.
type Status string

// The job states of the Ray Jobs API.
const (
	StatusPending   Status = "PENDING"
	StatusRunning   Status = "RUNNING"
	StatusStopped   Status = "STOPPED"
	StatusSucceeded Status = "SUCCEEDED"
	StatusFailed    Status = "FAILED"
)

// IsTerminal reports whether no further transition can happen from s.
func (s Status) IsTerminal() bool {
	return s == StatusStopped || s == StatusSucceeded || s == StatusFailed
}

// Job types reported in Details.Type.
const (
	TypeSubmission = "SUBMISSION"
	TypeDriver     = "DRIVER"
)

// Error types reported in Details.ErrorType.
const (
	ErrorTypeEntrypointFailed = "JOB_ENTRYPOINT_COMMAND_ERROR"
	ErrorTypeEntrypointStart  = "JOB_ENTRYPOINT_COMMAND_START_ERROR"
)

// DriverInfo describes the driver process of a job.
type DriverInfo struct {
	ID         string `json:"id"`
	NodeIPAddr string `json:"node_ip_address"`
	PID        string `json:"pid"`
}

// Details is one job as GET /api/jobs/{id} and GET /api/jobs/ return it.
// Optional fields are pointers so that "unset" is JSON null, as in Ray.
type Details struct {
	Type                   string            `json:"type"`
	JobID                  *string           `json:"job_id"`
	SubmissionID           *string           `json:"submission_id"`
	DriverInfo             *DriverInfo       `json:"driver_info"`
	Status                 Status            `json:"status"`
	Entrypoint             string            `json:"entrypoint"`
	Message                *string           `json:"message"`
	ErrorType              *string           `json:"error_type"`
	StartTime              *int64            `json:"start_time"`
	EndTime                *int64            `json:"end_time"`
	Metadata               map[string]string `json:"metadata"`
	RuntimeEnv             map[string]any    `json:"runtime_env"`
	DriverAgentHTTPAddress *string           `json:"driver_agent_http_address"`
	DriverNodeID           *string           `json:"driver_node_id"`
	DriverExitCode         *int              `json:"driver_exit_code"`
}

// SubmitRequest is the body of POST /api/jobs/.
type SubmitRequest struct {
	Entrypoint   string `json:"entrypoint"`
	SubmissionID string `json:"submission_id,omitempty"`
	// JobID is the deprecated spelling of SubmissionID.
	JobID               string             `json:"job_id,omitempty"`
	RuntimeEnv          map[string]any     `json:"runtime_env,omitempty"`
	Metadata            map[string]string  `json:"metadata,omitempty"`
	EntrypointNumCPUs   *float64           `json:"entrypoint_num_cpus,omitempty"`
	EntrypointNumGPUs   *float64           `json:"entrypoint_num_gpus,omitempty"`
	EntrypointMemory    *int64             `json:"entrypoint_memory,omitempty"`
	EntrypointResources map[string]float64 `json:"entrypoint_resources,omitempty"`
}

// SubmitResponse answers a submission. JobID repeats SubmissionID (deprecated field).
type SubmitResponse struct {
	JobID        string `json:"job_id"`
	SubmissionID string `json:"submission_id"`
}

// StopResponse answers POST /api/jobs/{id}/stop.
type StopResponse struct {
	Stopped bool `json:"stopped"`
}

// DeleteResponse answers DELETE /api/jobs/{id}.
type DeleteResponse struct {
	Deleted bool `json:"deleted"`
}

// LogsResponse answers GET /api/jobs/{id}/logs.
type LogsResponse struct {
	Logs string `json:"logs"`
}

// VersionResponse answers GET /api/version.
type VersionResponse struct {
	Version     string `json:"version"`
	RayVersion  string `json:"ray_version"`
	RayCommit   string `json:"ray_commit"`
	SessionName string `json:"session_name"`
}

// APIVersion is the Jobs API version raysim speaks (the "version" of /api/version).
const APIVersion = "5"

// ParseSubmitRequest decodes and checks a submission body the way Ray's server
// checks it: entrypoint must be a string, metadata values strings, the
// entrypoint_* quantities numbers (entrypoint_memory an integer).
func ParseSubmitRequest(data []byte) (SubmitRequest, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return SubmitRequest{}, &BadRequestError{Msg: "request body is not a JSON object: " + err.Error()}
	}
	if _, ok := raw["entrypoint"]; !ok {
		return SubmitRequest{}, &BadRequestError{Msg: "missing required field: entrypoint"}
	}
	var req SubmitRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return SubmitRequest{}, &BadRequestError{Msg: "invalid job submission: " + err.Error()}
	}
	if req.SubmissionID == "" && req.JobID != "" {
		req.SubmissionID = req.JobID
	}
	for name, v := range map[string]*float64{"entrypoint_num_cpus": req.EntrypointNumCPUs, "entrypoint_num_gpus": req.EntrypointNumGPUs} {
		if v != nil && *v < 0 {
			return SubmitRequest{}, &BadRequestError{Msg: name + " must not be negative"}
		}
	}
	return req, nil
}

// BadRequestError is a client error (HTTP 400).
type BadRequestError struct{ Msg string }

// Error returns the message.
func (e *BadRequestError) Error() string { return e.Msg }

// NotFoundError says no job has the given id (HTTP 404).
type NotFoundError struct{ ID string }

// Error says which job is missing.
func (e *NotFoundError) Error() string { return fmt.Sprintf("Job %s does not exist", e.ID) }

// DuplicateError says the submission_id is taken. Its text carries the phrase
// Ray uses ("Please use a different submission_id"), which clients such as
// KubeRay match to learn that the job was already submitted.
type DuplicateError struct{ ID string }

// Error names the taken id with the phrase clients match.
func (e *DuplicateError) Error() string {
	return fmt.Sprintf("submission_id %s is already taken by an existing job. Please use a different submission_id.", e.ID)
}

// NotTerminalError refuses to delete a job that has not finished.
type NotTerminalError struct {
	ID     string
	Status Status
}

// Error explains why the job cannot be deleted yet.
func (e *NotTerminalError) Error() string {
	return fmt.Sprintf("job %s is %s; only a job in a terminal state (STOPPED, SUCCEEDED, FAILED) can be deleted", e.ID, e.Status)
}
