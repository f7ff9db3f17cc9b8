package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcalls/modelcalls/rollout"
)

// How `modelcalls run` points a child at its gateway. Most harnesses and SDKs read a base-URL
// environment variable (dialect.ClientEnv); Codex, opencode and pi take their base URL from their own
// config, so run uses each one's own override mechanism for them (wireHarness), never editing the
// user's config files: the user's setup keeps naming the real model server, and the child alone is
// redirected.

// rolloutBase is the rollout's base URL on the gateway at gatewayBase.
func rolloutBase(gatewayBase, id string) string {
	return strings.TrimRight(gatewayBase, "/") + rollout.PathPrefix(id)
}

// setEnv returns env with each of set ("NAME=value") replacing any earlier value of its name, the
// other variables kept in order.
func setEnv(env []string, set ...string) []string {
	out := make([]string, 0, len(env)+len(set))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(set, func(s string) bool { return strings.HasPrefix(s, name+"=") }) {
			out = append(out, kv)
		}
	}
	return append(out, set...)
}

// getEnv is the value of name in env ("" when unset), the last one winning as in exec.
func getEnv(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if s, ok := strings.CutPrefix(kv, name+"="); ok {
			v = s
		}
	}
	return v
}

// harnessWiring is what wireHarness changed for one child: its argv and environment, a temporary
// dir to remove after it exits ("" when none), and what was done, for the log.
type harnessWiring struct {
	args []string
	env  []string
	tmp  string
	note string
	// keepIn is the user's dir that tmp stands in for ("" when none): what the child leaves in tmp
	// but links and generated is theirs, and finish moves it there (see keepChildFiles).
	keepIn    string
	linked    []string // entries of tmp that are links to keepIn's
	generated []string // entries of tmp run wrote itself, never kept
}

// finish is called after the child exited: it keeps what the child wrote into the temporary dir
// (keepChildFiles) and removes the dir. It returns a line for stderr about each file that could
// not be kept; the dir then stays where it is, so nothing the child wrote is lost.
func (w *harnessWiring) finish() []string {
	if w.tmp == "" {
		return nil
	}
	var problems []string
	if w.keepIn != "" {
		problems = keepChildFiles(w.tmp, w.keepIn, w.linked, w.generated)
	}
	if len(problems) == 0 {
		os.RemoveAll(w.tmp)
	}
	return problems
}

// wireHarness points a child that takes its base URL from its own config at the rollout's base
// URL, by the harness's own override mechanism, chosen by the command's base name:
//
//   - codex: one -c model_providers.<name>.base_url="<base>/v1" command-line override (placed
//     right after the command, where Codex takes global options) for every provider the user's
//     config.toml ($CODEX_HOME, default ~/.codex) defines; its built-in openai provider reads
//     OPENAI_BASE_URL.
//   - opencode: OPENCODE_CONFIG_CONTENT, the config opencode merges over every config file, with
//     provider.<name>.options.baseURL = "<base>/v1" for every provider the user's configs name,
//     and for openai and anthropic (whose SDK base URLs end in /v1 too).
//   - pi: PI_CODING_AGENT_DIR pointed at a temporary agent dir whose entries are links to the
//     user's (~/.pi/agent: settings, auth, sessions stay theirs; sessions/ is created when missing,
//     so a session written under run is there for the next `pi -c`) but for models.json, a copy with
//     every provider's baseUrl (and every model's) replaced: "<base>" for the anthropic-messages
//     API, "<base>/v1" for the others, plus overrides of the built-in openai and anthropic
//     providers. What pi creates in that dir while it runs (auth.json after a first /login,
//     settings.json, the tools it downloads into bin/) is moved into the user's agent dir after it
//     exits, as it would have been written there without run.
//
// base is the rollout's base URL on the gateway (no /v1), home the user's home dir (where the
// harnesses' default config dirs are), cwd the working directory (where opencode looks for a
// project config). Any other command is returned unchanged.
func wireHarness(args, env []string, base, home, cwd string) (harnessWiring, error) {
	w := harnessWiring{args: args, env: env}
	var err error
	switch filepath.Base(args[0]) {
	case "codex":
		err = wireCodex(&w, base, home)
	case "opencode":
		err = wireOpencode(&w, base, home, cwd)
	case "pi":
		err = wirePi(&w, base, home)
	}
	if err != nil && w.tmp != "" {
		os.RemoveAll(w.tmp)
	}
	return w, err
}

// codexProviderTable matches a [model_providers.<name>] table header of a Codex config.toml.
var codexProviderTable = regexp.MustCompile(`(?m)^\s*\[\s*model_providers\.("[^"]+"|'[^']+'|[A-Za-z0-9_-]+)\s*\]`)

// codexOverride matches a -c/--config override of a model provider in Codex's arguments.
var codexOverride = regexp.MustCompile(`^model_providers\.("[^"]+"|[A-Za-z0-9_-]+)[.=]`)

func wireCodex(w *harnessWiring, base, home string) error {
	dir := getEnv(w.env, "CODEX_HOME")
	if dir == "" {
		dir = filepath.Join(home, ".codex")
	}
	var names []string
	add := func(n string) {
		n = strings.Trim(n, `"'`)
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "config.toml"))
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("read Codex config: %w", err)
	}
	for _, m := range codexProviderTable.FindAllSubmatch(b, -1) {
		add(string(m[1]))
	}
	for i, a := range w.args {
		v, ok := strings.CutPrefix(a, "--config=")
		if !ok && (a == "-c" || a == "--config") && i+1 < len(w.args) {
			v, ok = w.args[i+1], true
		}
		if m := codexOverride.FindStringSubmatch(v); ok && m != nil {
			add(m[1])
		}
	}
	if len(names) == 0 {
		w.note = "codex: its built-in openai provider reads OPENAI_BASE_URL"
		return nil
	}
	url := strconv.Quote(base + "/v1")
	args := []string{w.args[0]}
	for _, n := range names {
		args = append(args, "-c", "model_providers."+tomlKey(n)+".base_url="+url)
	}
	w.args = append(args, w.args[1:]...)
	w.note = "codex: -c model_providers.<name>.base_url for " + strings.Join(names, ", ")
	return nil
}

// tomlBareKey matches a TOML bare key.
var tomlBareKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// tomlKey quotes a TOML key that is not a bare key.
func tomlKey(k string) string {
	if tomlBareKey.MatchString(k) {
		return k
	}
	return strconv.Quote(k)
}

func wireOpencode(w *harnessWiring, base, home, cwd string) error {
	cfgHome := getEnv(w.env, "XDG_CONFIG_HOME")
	if cfgHome == "" {
		cfgHome = filepath.Join(home, ".config")
	}
	files := []string{
		filepath.Join(cfgHome, "opencode", "config.json"),
		filepath.Join(cfgHome, "opencode", "opencode.json"),
		filepath.Join(cfgHome, "opencode", "opencode.jsonc"),
	}
	if p := getEnv(w.env, "OPENCODE_CONFIG"); p != "" {
		files = append(files, p)
	}
	for d := cwd; ; d = filepath.Dir(d) {
		files = append(files, filepath.Join(d, "opencode.json"), filepath.Join(d, "opencode.jsonc"),
			filepath.Join(d, ".opencode", "opencode.json"), filepath.Join(d, ".opencode", "opencode.jsonc"))
		if filepath.Dir(d) == d {
			break
		}
	}
	names := []string{"openai", "anthropic"}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		names = appendProviders(names, stripJSONC(b))
	}
	content := map[string]any{}
	if c := getEnv(w.env, "OPENCODE_CONFIG_CONTENT"); c != "" {
		if err := json.Unmarshal(stripJSONC([]byte(c)), &content); err != nil {
			return fmt.Errorf("OPENCODE_CONFIG_CONTENT is not a JSON object: %w", err)
		}
		names = appendProviders(names, stripJSONC([]byte(c)))
	}
	providers, _ := content["provider"].(map[string]any)
	if providers == nil {
		providers = map[string]any{}
	}
	for _, n := range names {
		p, _ := providers[n].(map[string]any)
		if p == nil {
			p = map[string]any{}
		}
		opts, _ := p["options"].(map[string]any)
		if opts == nil {
			opts = map[string]any{}
		}
		opts["baseURL"] = base + "/v1"
		p["options"] = opts
		providers[n] = p
	}
	content["provider"] = providers
	b, err := json.Marshal(content)
	if err != nil {
		return err
	}
	w.env = setEnv(w.env, "OPENCODE_CONFIG_CONTENT="+string(b))
	w.note = "opencode: OPENCODE_CONFIG_CONTENT sets provider.<name>.options.baseURL for " + strings.Join(names, ", ")
	return nil
}

// appendProviders adds the provider names of an opencode config (its "provider" object's keys) to
// names; a file that is not a JSON object is left alone (opencode itself reports it).
func appendProviders(names []string, b []byte) []string {
	var cfg struct {
		Provider map[string]json.RawMessage `json:"provider"`
	}
	if json.Unmarshal(b, &cfg) != nil {
		return names
	}
	keys := make([]string, 0, len(cfg.Provider))
	for k := range cfg.Provider {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(names, k) {
			names = append(names, k)
		}
	}
	return names
}

// stripJSONC removes // and /* */ comments and trailing commas outside strings, making JSONC JSON.
func stripJSONC(b []byte) []byte {
	var out bytes.Buffer
	inStr := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inStr:
			out.WriteByte(c)
			if c == '\\' && i+1 < len(b) {
				i++
				out.WriteByte(b[i])
			} else if c == '"' {
				inStr = false
			}
		case c == '"':
			inStr = true
			out.WriteByte(c)
		case c == '/' && i+1 < len(b) && b[i+1] == '/':
			for i < len(b) && b[i] != '\n' {
				i++
			}
			out.WriteByte('\n')
		case c == '/' && i+1 < len(b) && b[i+1] == '*':
			end := bytes.Index(b[i+2:], []byte("*/"))
			if end < 0 {
				i = len(b)
			} else {
				i += end + 3
			}
		case c == ',':
			j := i + 1
			for j < len(b) && (b[j] == ' ' || b[j] == '\t' || b[j] == '\n' || b[j] == '\r') {
				j++
			}
			if j < len(b) && (b[j] == '}' || b[j] == ']') {
				continue
			}
			out.WriteByte(c)
		default:
			out.WriteByte(c)
		}
	}
	return out.Bytes()
}

// piBuiltins are pi's built-in providers run redirects besides the user's own, with the API each
// speaks (which decides /v1).
var piBuiltins = []struct{ name, api string }{{"openai", "openai-responses"}, {"anthropic", "anthropic-messages"}}

func wirePi(w *harnessWiring, base, home string) error {
	src := getEnv(w.env, "PI_CODING_AGENT_DIR")
	if src == "" {
		src = filepath.Join(home, ".pi", "agent")
	}
	models := map[string]any{}
	if b, err := os.ReadFile(filepath.Join(src, "models.json")); err == nil {
		if err := json.Unmarshal(stripJSONC(b), &models); err != nil {
			return fmt.Errorf("pi's %s is not a JSON object: %w", filepath.Join(src, "models.json"), err)
		}
	} else if !os.IsNotExist(err) {
		return fmt.Errorf("read pi's models.json: %w", err)
	}
	url := func(api string) string {
		if api == "anthropic-messages" {
			return base
		}
		return base + "/v1"
	}
	providers, _ := models["providers"].(map[string]any)
	if providers == nil {
		providers = map[string]any{}
	}
	var names []string
	for name, v := range providers {
		p, ok := v.(map[string]any)
		if !ok {
			continue
		}
		api, _ := p["api"].(string)
		if api == "" && name == "anthropic" {
			api = "anthropic-messages"
		}
		p["baseUrl"] = url(api)
		if ms, ok := p["models"].([]any); ok {
			for _, m := range ms {
				if m, ok := m.(map[string]any); ok && m["baseUrl"] != nil {
					mapi, _ := m["api"].(string)
					if mapi == "" {
						mapi = api
					}
					m["baseUrl"] = url(mapi)
				}
			}
		}
		names = append(names, name)
	}
	for _, b := range piBuiltins {
		if _, ok := providers[b.name]; !ok {
			providers[b.name] = map[string]any{"baseUrl": url(b.api)}
			names = append(names, b.name)
		}
	}
	models["providers"] = providers
	out, err := json.MarshalIndent(models, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "modelcalls-pi-agent-")
	if err != nil {
		return fmt.Errorf("pi agent dir: %w", err)
	}
	w.tmp, w.keepIn, w.generated = tmp, src, []string{"models.json"}
	// pi writes each session under sessions/ of its agent dir, and -c continues the latest one
	// there: the user's sessions dir must exist to be linked, or a first run's session would be
	// written into the temporary dir and removed with it (as pi itself would, it is created).
	if err := os.MkdirAll(filepath.Join(src, "sessions"), 0o755); err != nil {
		return fmt.Errorf("pi's sessions dir: %w", err)
	}
	ents, err := os.ReadDir(src)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("read pi's agent dir: %w", err)
	}
	for _, e := range ents {
		if e.Name() == "models.json" {
			continue
		}
		if err := os.Symlink(filepath.Join(src, e.Name()), filepath.Join(tmp, e.Name())); err != nil {
			return fmt.Errorf("pi agent dir: %w", err)
		}
		w.linked = append(w.linked, e.Name())
	}
	if err := os.WriteFile(filepath.Join(tmp, "models.json"), out, 0o600); err != nil {
		return fmt.Errorf("pi agent dir: %w", err)
	}
	slices.Sort(names)
	w.env = setEnv(w.env, "PI_CODING_AGENT_DIR="+tmp)
	w.note = "pi: PI_CODING_AGENT_DIR is a temporary agent dir whose models.json sets baseUrl for " + strings.Join(names, ", ")
	return nil
}

// keepChildFiles moves what a child wrote into tmp, a stand-in for the user's dir dst whose
// entries linked (by name) are links to dst's, into dst. An entry that is not such a link and not
// one of generated is new (a file the child created on its first run there) or replaced a link (a
// file the child rewrote by renaming a new copy over it); either way it is what the child would
// have left in dst without run. A new entry whose name dst gained meanwhile (another run of the
// child) never replaces it: it is left in tmp and named in the returned lines, as is anything
// that cannot be moved.
func keepChildFiles(tmp, dst string, linked, generated []string) []string {
	ents, err := os.ReadDir(tmp)
	if err != nil {
		return []string{fmt.Sprintf("read %s: %v; it is left in place", tmp, err)}
	}
	var problems []string
	for _, e := range ents {
		name := e.Name()
		from, to := filepath.Join(tmp, name), filepath.Join(dst, name)
		if slices.Contains(generated, name) {
			continue
		}
		if target, err := os.Readlink(from); err == nil && target == to {
			continue // still the link run made: what the child wrote went to the user's entry
		}
		_, err := os.Lstat(to)
		switch {
		case err == nil && !slices.Contains(linked, name):
			problems = append(problems, fmt.Sprintf("%s written under run is left in %s: %s appeared meanwhile and is kept", name, tmp, to))
			continue
		case err == nil && e.IsDir():
			problems = append(problems, fmt.Sprintf("%s replaced by a directory under run is left in %s: %s is kept", name, tmp, to))
			continue
		}
		if err := moveEntry(from, to); err != nil {
			problems = append(problems, fmt.Sprintf("keep %s: %v; it is left in %s", name, err, tmp))
		}
	}
	return problems
}

// moveEntry renames from to to, or, across file systems (a temporary dir on tmpfs, the user's on
// disk), copies it (files with their mode, directories, links) to a temporary name beside to, then
// renames that into place and removes from.
func moveEntry(from, to string) error {
	if os.Rename(from, to) == nil {
		return nil
	}
	tmp := filepath.Join(filepath.Dir(to), "."+filepath.Base(to)+".modelcalls-"+strconv.Itoa(os.Getpid()))
	if err := copyTree(from, tmp); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := os.Rename(tmp, to); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	return os.RemoveAll(from)
}

// copyTree copies the file, directory or symbolic link from to to, which must not exist.
func copyTree(from, to string) error {
	fi, err := os.Lstat(from)
	if err != nil {
		return err
	}
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		target, err := os.Readlink(from)
		if err != nil {
			return err
		}
		return os.Symlink(target, to)
	case fi.IsDir():
		if err := os.Mkdir(to, fi.Mode().Perm()); err != nil {
			return err
		}
		ents, err := os.ReadDir(from)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if err := copyTree(filepath.Join(from, e.Name()), filepath.Join(to, e.Name())); err != nil {
				return err
			}
		}
		return nil
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file", from)
	}
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
