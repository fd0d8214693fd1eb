package main

import (
	"context"

	sluice "sluice.dev/guest"
)

// ConfigServer serves firmware downloads, one at a time, work_ms each.
type ConfigServer struct {
	workMs uint64
	served []string
	seen   map[string]bool
}

// Handle serves a download or answers state.
func (c *ConfigServer) Handle(_ context.Context, env *sluice.Envelope) ([]byte, error) {
	switch env.MsgType {
	case sluice.DefaultDispatchMsgType, "process", "download":
		var req struct {
			Download string `json:"download"`
			Worker   string `json:"worker"`
		}
		if err := decode(env, &req); err != nil {
			return nil, err
		}
		if req.Worker == "" {
			return nil, sluice.InvalidArgument("INVALID_ARGUMENT: download without worker")
		}
		busy(c.workMs)
		if !c.seen[req.Worker] {
			c.seen[req.Worker] = true
			c.served = append(c.served, req.Worker)
		}
		return sluice.Reply(map[string]any{"download": req.Download, "worker": req.Worker})
	case "state":
		return sluice.Reply(map[string]any{"served": nonNil(c.served)})
	}
	return nil, unknown("ConfigServer", env)
}

// TelemetryCollector records telemetry samples once each and counts bursts, work_ms each.
type TelemetryCollector struct {
	workMs    uint64
	telemetry []int
	seen      map[int]bool
	bursts    int
}

// Handle records a sample or a burst, or answers state.
func (c *TelemetryCollector) Handle(_ context.Context, env *sluice.Envelope) ([]byte, error) {
	switch env.MsgType {
	case sluice.DefaultDispatchMsgType, "process":
		var sample struct {
			Type string `json:"type"`
			Seq  int    `json:"seq"`
		}
		if err := decode(env, &sample); err != nil {
			return nil, err
		}
		busy(c.workMs)
		switch sample.Type {
		case "telemetry":
			if !c.seen[sample.Seq] {
				c.seen[sample.Seq] = true
				c.telemetry = append(c.telemetry, sample.Seq)
			}
		case "burst":
			c.bursts++
		default:
			return nil, sluice.InvalidArgument("INVALID_ARGUMENT: neither telemetry nor burst")
		}
		return sluice.Reply(map[string]any{"type": sample.Type, "seq": sample.Seq})
	case "state":
		return sluice.Reply(map[string]any{"telemetry": nonNil(c.telemetry), "bursts": c.bursts})
	}
	return nil, unknown("TelemetryCollector", env)
}

// Device takes firmware when online; offline it fails and the outbox retries later.
type Device struct {
	online   bool
	firmware []int
	seen     map[int]bool
}

// Handle installs a firmware or answers state.
func (d *Device) Handle(_ context.Context, env *sluice.Envelope) ([]byte, error) {
	switch env.MsgType {
	case sluice.DefaultDispatchMsgType, "process":
		var req struct {
			Firmware *int `json:"firmware"`
		}
		if err := decode(env, &req); err != nil {
			return nil, err
		}
		if req.Firmware == nil {
			return nil, sluice.InvalidArgument("INVALID_ARGUMENT: no firmware")
		}
		if !d.online {
			// "Come back in a second": the relay backs off at least that long.
			return nil, deviceOffline()
		}
		if k := *req.Firmware; !d.seen[k] {
			d.seen[k] = true
			d.firmware = append(d.firmware, k)
		}
		return sluice.Reply(map[string]any{"firmware": *req.Firmware})
	case "state":
		return sluice.Reply(map[string]any{"firmware": nonNil(d.firmware)})
	}
	return nil, unknown("Device", env)
}

// nonNil returns s, or an empty slice for nil (so it marshals as [] rather than null).
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// deviceOffline is what an offline device answers: RESOURCE_EXHAUSTED with a retry hint, so
// the relay backs off at least retry_after_ms between attempts (capacity, not a fault).
func deviceOffline() error {
	after := uint64(deviceRetryAfterMs)
	return &sluice.Error{Code: sluice.CodeResourceExhausted,
		Message: "RESOURCE_EXHAUSTED: device offline (retry_after_ms=1000)", RetryAfterMs: &after}
}

const deviceRetryAfterMs = 1000
