//go:build e2e && unix

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcalls/modelcalls/internal/capturetest"
)

// harnessRun is one non-interactive run of an agent harness against one base URL: how to
// configure and start it. The exact commands and configs follow what the shared fixtures
// (clients/<harness>.json, fields command and notes) record each harness doing.
type harnessRun struct {
	name    string // run name, part of the rollout id: "claude-code", "pi-chat", ...
	harness string // installer name (scripts/install-harnesses.sh)
	dialect string // the one wire dialect its model calls use
	// baseURL is what the harness is told, given the gateway's rollout base
	// "http://127.0.0.1:PORT/ng-rollout/<id>": with "/v1" for OpenAI-style clients, without for
	// Anthropic-style ones (they append /v1/messages themselves).
	baseURL func(rolloutBase string) string
	// command returns argv (after the harness executable) and extra environment, after writing
	// any config files under home.
	command func(t *testing.T, home, baseURL, prompt string) (args, env []string)
	// viaRun: the harness takes its base URL only from the variables `modelcalls run` sets
	// (command ignores baseURL). Every recorded run goes through `modelcalls run --upstream`; the
	// replay starts such a harness under `modelcalls run --gateway REPLAY --rollout ID`.
	viaRun bool
}

// argv returns the executable and arguments that start the harness exe with args: as they are, or
// for a viaRun harness under `bin run --gateway gateway --rollout id --`.
func (r harnessRun) argv(exe, bin, gateway, id string, args []string) (string, []string) {
	if !r.viaRun {
		return exe, args
	}
	return bin, append([]string{"run", "--gateway", gateway, "--rollout", id, "--", exe}, args...)
}

const harnessPrompt = "Read hello.txt and tell me what it says"

func withV1(base string) string { return strings.TrimRight(base, "/") + "/v1" }
func bare(base string) string   { return strings.TrimRight(base, "/") }

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	capturetest.WriteFile(t, path, []byte(content), 0o644)
}

func writeJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, string(b)+"\n")
}

// piRun configures pi (~/.pi/agent/models.json) with one provider of the given pi API kind.
func piRun(name, dialect, api, model string, baseURL func(string) string) harnessRun {
	return harnessRun{
		name: name, harness: "pi", dialect: dialect, baseURL: baseURL,
		command: func(t *testing.T, home, base, prompt string) ([]string, []string) {
			key := "sk-e2e-dummy"
			if dialect == DialectMessages {
				key = "sk-ant-e2e-dummy"
			}
			writeJSONFile(t, filepath.Join(home, ".pi", "agent", "models.json"), map[string]any{
				"providers": map[string]any{"e2e": map[string]any{
					"baseUrl": base, "api": api, "apiKey": key,
					"models": []any{map[string]any{"id": model}},
				}},
			})
			return []string{"-p", "--model", "e2e/" + model, prompt}, nil
		},
	}
}

// harnessRuns lists every run of the matrix, in the order they are run.
func harnessRuns() []harnessRun {
	return []harnessRun{
		{
			// Messages, always streaming, POST {base}/v1/messages?beta=true; HEAD {base}/api/hello
			// first; session id in x-claude-code-session-id.
			name: "claude-code", harness: "claude-code", dialect: DialectMessages, baseURL: bare,
			command: func(t *testing.T, home, base, prompt string) ([]string, []string) {
				return []string{"-p", prompt}, []string{
					"ANTHROPIC_BASE_URL=" + base,
					"ANTHROPIC_API_KEY=sk-ant-e2e-dummy",
					"DISABLE_AUTOUPDATER=1",
				}
			},
		},
		{
			// Responses through a custom model provider (config.toml), plain HTTP SSE.
			name: "codex", harness: "codex", dialect: DialectResponses, baseURL: withV1,
			command: func(t *testing.T, home, base, prompt string) ([]string, []string) {
				codexHome := filepath.Join(home, ".codex")
				writeFile(t, filepath.Join(codexHome, "config.toml"), strings.Join([]string{
					`model = "e2e-model"`,
					`model_provider = "e2e"`,
					``,
					`[model_providers.e2e]`,
					`name = "e2e"`,
					`base_url = "` + base + `"`,
					`env_key = "OPENAI_API_KEY"`,
					`wire_api = "responses"`,
					``,
				}, "\n"))
				return []string{"exec", "--skip-git-repo-check", prompt}, []string{
					"CODEX_HOME=" + codexHome,
					"OPENAI_API_KEY=sk-e2e-dummy",
				}
			},
		},
		{
			// Chat through @ai-sdk/openai-compatible; a title-generation call comes first.
			name: "opencode", harness: "opencode", dialect: DialectChat, baseURL: withV1,
			command: func(t *testing.T, home, base, prompt string) ([]string, []string) {
				writeJSONFile(t, filepath.Join(home, ".config", "opencode", "opencode.json"), map[string]any{
					"$schema": "https://opencode.ai/config.json",
					"model":   "e2e/e2e-model",
					"provider": map[string]any{"e2e": map[string]any{
						"npm":     "@ai-sdk/openai-compatible",
						"name":    "e2e",
						"options": map[string]any{"baseURL": base, "apiKey": "sk-e2e-dummy"},
						"models":  map[string]any{"e2e-model": map[string]any{}},
					}},
				})
				return []string{"run", prompt}, []string{
					"OPENCODE_DISABLE_MODELS_FETCH=1",
					"OPENCODE_DISABLE_AUTOUPDATE=1",
				}
			},
		},
		piRun("pi-chat", DialectChat, "openai-completions", "e2e-model", withV1),
		piRun("pi-responses", DialectResponses, "openai-responses", "e2e-model", withV1),
		piRun("pi-messages", DialectMessages, "anthropic-messages", "claude-e2e", bare),
		{
			// Gemini API, streamGenerateContent?alt=sse, under `modelcalls run`: run sets
			// GOOGLE_GEMINI_BASE_URL. With that variable alone Gemini CLI picks its "gateway" auth,
			// which its non-interactive mode refuses, so the settings select API-key auth (the key
			// is a dummy; the base URL still comes from the variable); the project dir is trusted
			// by environment, and usage statistics (sent to Google) are off.
			name: "gemini-cli", harness: "gemini-cli", dialect: DialectGemini, baseURL: bare, viaRun: true,
			command: func(t *testing.T, home, _, prompt string) ([]string, []string) {
				writeJSONFile(t, filepath.Join(home, ".gemini", "settings.json"), map[string]any{
					"security": map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
					"privacy":  map[string]any{"usageStatisticsEnabled": false},
					"general":  map[string]any{"disableAutoUpdate": true, "disableUpdateNag": true},
				})
				return []string{"-p", prompt, "-m", "e2e-model"}, []string{
					"GEMINI_API_KEY=e2e-dummy",
					"GEMINI_CLI_TRUST_WORKSPACE=true",
				}
			},
		},
		{
			// Chat only, streaming with include_usage.
			name: "qwen-code", harness: "qwen-code", dialect: DialectChat, baseURL: withV1,
			command: func(t *testing.T, home, base, prompt string) ([]string, []string) {
				return []string{"--auth-type", "openai", "-p", prompt}, []string{
					"OPENAI_API_KEY=sk-e2e-dummy",
					"OPENAI_BASE_URL=" + base,
					"OPENAI_MODEL=e2e-model",
				}
			},
		},
	}
}
