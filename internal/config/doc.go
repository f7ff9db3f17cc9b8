// Package config owns the NeMo Gym global config as modelcalls reads it: a YAML file whose top-level
// keys are run-wide settings, plus Hydra-style command-line overrides (++key=value, +key=value,
// key=value, ~key), merged into one map (Values). The capture options derived from it
// (observability_enabled, model_call_capture_dir) follow the rules of the root package's
// modelcalls.ObservabilityEnabled and modelcalls.CaptureDirsFromConfig, their one implementation,
// which take Values as they are: this package reads and merges, it does not interpret.
//
// Only top-level keys count: the same names nested in a server block are ignored, and no environment
// variable is consulted, exactly as NeMo Gym does.
package config
