//! Writing the services: each compose service as a process or an adapter service.

use super::*;

impl Init {
    // --- rendering ----------------------------------------------------------------

    pub(super) fn render_services(&mut self) -> String {
        let mut out = String::new();
        let adapters: Vec<SvcId> = self
            .svcs
            .ids()
            .filter(|&i| matches!(self.svcs[i].kind, Kind::Adapter(_)))
            .collect();
        if !adapters.is_empty() {
            out.push_str("# Adapter services: every world gets its own slice (a database, a key prefix, …)\n# of one shared server.\n\n");
        }
        for i in adapters {
            self.render_adapter(i, &mut out);
        }
        for i in self.svcs.ids() {
            match self.svcs[i].kind {
                Kind::Process => {
                    self.defer_env = true;
                    self.render_process(i, &mut out);
                    self.defer_env = false;
                }
                Kind::Unmapped => self.unmapped(i),
                Kind::Replaced(what) => self.replaced(i, what, &mut out),
                Kind::Commented(why) => self.commented(i, why, &mut out),
                Kind::Adapter(_) => {}
            }
        }
        // What every process service sets alike is written once, under [defaults.env].
        let blocks = std::mem::take(&mut self.env_blocks);
        let shared = shared_env(&blocks);
        for (i, lines) in &blocks {
            let name = self.svcs[*i].name.clone();
            let block = env_table(&format!("services.{name}.env"), lines, &shared);
            out = out.replacen(&env_placeholder(*i), &block, 1);
        }
        for (db, lines) in std::mem::take(&mut self.migrate_env) {
            let name = self.svcs[db].name.clone();
            let mut kept: Vec<EnvLine> = lines
                .into_iter()
                .filter(|l| l.value.as_ref() != shared.get(&l.key))
                .collect();
            if let Some(first) = kept.first_mut() {
                first.comment = Some(if shared.is_empty() {
                    "migrate gets DATABASE_URL (this database) and the settings of the code it runs:".to_owned()
                } else {
                    "migrate gets DATABASE_URL (this database), [defaults.env] and the rest of the settings of the code it runs:".to_owned()
                });
            }
            let block = env_table(&format!("services.{name}.env"), &kept, &BTreeMap::new());
            out = out.replacen(&env_placeholder(db), &block, 1);
        }
        if !shared.is_empty() {
            let lines: Vec<EnvLine> = shared
                .iter()
                .map(|(k, v)| EnvLine {
                    key: k.clone(),
                    value: Some(v.clone()),
                    comment: None,
                })
                .collect();
            let keys: Vec<&str> = shared.keys().map(String::as_str).collect();
            self.mapped.push(format!(
                "[defaults.env]: {} (every process service sets them alike)",
                keys.join(", ")
            ));
            let table = env_table("defaults.env", &lines, &BTreeMap::new());
            out = format!(
                "# Every process service below sets these alike: each service's env starts from\n# them (its own keys win), and so does a database's migrate and seed.{table}\n{out}"
            );
        }
        out
    }

    pub(super) fn in_output(&self, j: SvcId) -> bool {
        !matches!(
            self.svcs[j].kind,
            Kind::Unmapped | Kind::Replaced(_) | Kind::Commented(_)
        )
    }

    /// A service written commented out: what it would be, under why it is not.
    pub(super) fn commented(&mut self, i: SvcId, why: Why, out: &mut String) {
        let name = self.svcs[i].name.clone();
        let todos = self.to_decide.len();
        let mapped = self.mapped.len();
        let mut block = String::new();
        self.render_process(i, &mut block);
        // What it leaves to decide is moot while it is commented out.
        self.to_decide.truncate(todos);
        self.mapped.truncate(mapped);
        let (head, line) = match why {
            Why::TestOnly(what) => (
                format!("# {name} runs {what}: not part of a running world, so it is left out. To run\n# the tests against a world: `binky exec NAME -- <the command below>`."),
                format!("{name}: commented out ({what}; run it with binky exec)"),
            ),
            Why::OneShot => (
                format!("# {name} runs once before the others start (migrations, initial data): in binky a\n# database's `migrate` (and `seed`) does that, once per golden template or world."),
                format!("{name}: commented out (runs once before the others: the database's migrate does that)"),
            ),
            Why::NotInstalled(mc) => {
                let install = mc.install;
                self.note(&format!("{} ({}) is not installed, so [services.{name}] is commented out: install it with {install}, then uncomment it (and the SMTP settings that name it)", mc.tool, mc.program));
                (
                    format!("# {name}: {} catches this world's mail, but `{}` is not installed here. Install\n# it with {install},\n# then uncomment this service and the settings below that name it.", mc.tool, mc.program),
                    format!("{name}: commented out ({} is not installed: {install})", mc.program),
                )
            }
        };
        out.push_str(&head);
        out.push('\n');
        for l in block.trim_end().lines() {
            if l.is_empty() {
                out.push_str("#\n");
            } else if l.starts_with('#') {
                out.push_str(&format!("#{l}\n"));
            } else {
                out.push_str(&format!("# {l}\n"));
            }
        }
        out.push('\n');
        self.mapped.push(line);
    }

    /// Infrastructure binky replaces: a comment in the file, no service.
    pub(super) fn replaced(&mut self, i: SvcId, what: &str, out: &mut String) {
        let raw = self.svcs[i].raw.clone();
        out.push_str(&format!(
            "# {raw} ({what}) is left out: binky's proxy serves every world's services at\n# http://<service>.<world>.{}.localhost (and https with `https = true`); routing\n# labels and rules for it have no use here.\n\n",
            self.project
        ));
        self.mapped.push(format!(
            "{raw}: left out ({what}; binky's proxy serves every world)"
        ));
    }

    /// `depends_on` (list or map form), only services that are in the file.
    pub(super) fn depends_on(&mut self, i: SvcId) -> (Vec<String>, Vec<String>) {
        let names: Vec<String> = match self.svcs[i].def.get("depends_on") {
            Some(Value::Mapping(m)) => m.keys().filter_map(scalar).collect(),
            v => string_list(v),
        };
        let mut kept = Vec::new();
        let mut dropped = Vec::new();
        for d in names {
            match self.svcs.find(|s| s.raw == d) {
                Some(j) if self.in_output(j) && j != i => {
                    let n = self.svcs[j].name.clone();
                    if !kept.contains(&n) {
                        kept.push(n);
                    }
                }
                _ => dropped.push(d),
            }
        }
        (kept, dropped)
    }

    /// An adapter service: `[services.X]` with `adapter` (and `admin_url` when binky does
    /// not run the server itself), `depends_on` and `migrate`; what the container had that
    /// a slice cannot carry becomes a TODO.
    pub(super) fn render_adapter(&mut self, i: SvcId, out: &mut String) {
        let Kind::Adapter(adapter) = self.svcs[i].kind else {
            return;
        };
        let name = self.svcs[i].name.clone();
        let def = self.svcs[i].def.clone();
        let admin = Admin::of(adapter, &name, &def);
        if admin.server.is_none() {
            self.reason(
                &admin.var,
                format!(
                    "the admin address of {name}'s server, e.g. {}",
                    admin.example
                ),
            );
        }
        out.push_str(&format!("[services.{name}]\n"));
        self.write_adapter_source(i, out);
        admin.write_comment(out);
        out.push_str(&format!("adapter = {}\n", q(adapter)));
        if admin.server.is_none() {
            out.push_str(&format!(
                "admin_url = {}\n",
                q(&format!("${{env.{}}}", admin.var))
            ));
        }
        let (deps, _) = self.depends_on(i);
        if !deps.is_empty() {
            out.push_str(&format!("depends_on = {}\n", toml_list(&deps)));
        }
        let migrated = self.render_migration(i, out);
        if adapter == "postgres" && !migrated {
            out.push_str("# migrate = \"psql \\\"$DATABASE_URL\\\" -v ON_ERROR_STOP=1 -f schema.sql\"\n# seed = \"…\"\n# clone_from = \"golden\"   # migrate and seed once; every world is a server-side copy\n");
        }
        out.push('\n');
        self.container_leftovers(&name, adapter, &def);
        self.other_keys(i, ADAPTER_KEYS);
        let line = self.adapter_mapped_line(i, adapter, &admin);
        self.mapped.push(line);
    }

    /// The comment under an adapter's `[services.X]` on where it came from: the image, and
    /// which of the container's settings a slice does not need.
    fn write_adapter_source(&mut self, i: SvcId, out: &mut String) {
        let name = self.svcs[i].name.clone();
        let image = self.svcs[i].image.clone().unwrap_or_default();
        let def = &self.svcs[i].def;
        let mut container_bits: Vec<&str> = Vec::new();
        if !env_entries(def).is_empty() {
            container_bits.push("environment");
        }
        if def.contains_key("ports") || def.contains_key("expose") {
            container_bits.push("ports");
        }
        if def.contains_key("volumes") {
            container_bits.push("volumes");
        }
        if def.contains_key("healthcheck") {
            container_bits.push("healthcheck");
        }
        if let Some(from) = self.svcs[i].cmd_from.clone().filter(|_| image.is_empty()) {
            out.push_str(&format!("# {from}\n"));
        } else {
            out.push_str(&format!(
                "# compose: image {}",
                one_line(&self.redact(&name, &image))
            ));
            if !container_bits.is_empty() {
                out.push_str(&format!(
                    "; not needed with a slice: its {}",
                    container_bits.join(", ")
                ));
            }
            out.push('\n');
        }
    }

    /// What the container had that a slice does not need, and what it might: TODOs for
    /// init scripts, mounted configuration, a custom image and server flags.
    fn container_leftovers(&mut self, name: &str, adapter: &str, def: &Mapping) {
        for (src, dst) in volumes(def) {
            if dst.contains("docker-entrypoint-initdb.d") {
                let src = self.redact(name, &src);
                let hint = if adapter == "postgres" {
                    format!(" (e.g. migrate = \"psql \\\"$DATABASE_URL\\\" -v ON_ERROR_STOP=1 -f {src}\")")
                } else {
                    String::new()
                };
                self.todo(format!("{name}: {src} is mounted into {dst}, which the image runs at first start: make it the `migrate` command{hint}"));
            } else if is_project_path(&src) {
                self.todo(format!("{name}: {src} is mounted at {dst} (server configuration?): set it on the shared server; a slice cannot carry it"));
            }
        }
        if def.get("build").is_some_and(|b| !b.is_null()) {
            self.todo(format!("{name}: compose builds a custom {adapter} image: install what it adds (extensions, configuration) on the shared server"));
        }
        if def.contains_key("command") {
            self.todo(format!("{name}: its `command` (server flags) is not carried: set them on the shared server if they matter"));
        }
    }

    /// The adapter service's line in the summary of what was mapped.
    fn adapter_mapped_line(&self, i: SvcId, adapter: &str, admin: &Admin) -> String {
        let svc = &self.svcs[i];
        let (name, raw) = (&svc.name, &svc.raw);
        let image = svc.image.clone().unwrap_or_default();
        let how = if let Some(server) = admin.server {
            format!("binky runs {server}")
        } else {
            format!("admin_url = ${{env.{}}}", admin.var)
        };
        let renamed = if raw != name {
            format!(" (renamed from {raw})")
        } else {
            String::new()
        };
        let source = match &svc.cmd_from {
            Some(from) if image.is_empty() => from.clone(),
            _ => format!("image {}", one_line(&image)),
        };
        format!("{name}{renamed}: {source} → adapter {adapter} ({how})")
    }

    pub(super) fn unmapped(&mut self, i: SvcId) {
        let svc = &self.svcs[i];
        let what = match &svc.image {
            Some(image) => format!("runs image {image}, which binky has no adapter for"),
            None => "has no image, build or command".to_owned(),
        };
        let line = format!(
            "{}: {what}, and compose gives no command to run on the host: run it yourself, or add [services.{}] with a cmd",
            svc.raw, svc.name
        );
        let raw = svc.raw.clone();
        let line = self.redact(&raw, &line);
        self.todo(line);
        self.mapped
            .push(format!("{raw}: not mapped (see the TODOs)"));
    }

    pub(super) fn workdir(&mut self, i: SvcId) -> Option<String> {
        let def = self.svcs[i].def.clone();
        let name = self.svcs[i].name.clone();
        let working_dir = def
            .get("working_dir")
            .and_then(scalar)
            .map(|w| self.interpolate(&w));
        let mut chosen: Option<(String, Dir)> = None;
        if let Some(w) = &working_dir {
            if !w.starts_with('/') {
                chosen = Some((w.clone(), normalise(w)));
            } else {
                // `working_dir: /app` with `./web:/app` mounted: the code is in ./web.
                for (src, dst) in volumes(&def) {
                    let dst = dst.trim_end_matches('/');
                    if let Some(rest) = w.strip_prefix(dst) {
                        if (rest.is_empty() || rest.starts_with('/')) && is_project_path(&src) {
                            let path = format!("{src}{rest}");
                            chosen = Some((path.clone(), normalise(&path)));
                            break;
                        }
                    }
                }
            }
        }
        if chosen.is_none() {
            // The Dockerfile's WORKDIR, where a COPY maps it into the project.
            if let Some(build) = Build::of(&def) {
                let df = build.dockerfile(&self.repo);
                if let Some(host) = df
                    .as_ref()
                    .and_then(|df| df.host_path(&build.context, df.workdir.as_deref()?))
                {
                    if !host.is_empty() && host != build.context {
                        chosen = Some((host.clone(), normalise(&host)));
                    }
                }
            }
        }
        if chosen.is_none() {
            let context = match def.get("build") {
                Some(Value::Mapping(m)) => Some(
                    m.get("context")
                        .and_then(scalar)
                        .unwrap_or_else(|| ".".into()),
                ),
                Some(v) => scalar(v),
                None => None,
            }
            .map(|c| self.interpolate(&c));
            if let Some(c) = context {
                if !c.contains("://") && !c.starts_with("git@") && !c.starts_with('/') {
                    chosen = Some((c.clone(), normalise(&c)));
                }
            }
        }
        match chosen {
            Some((_, Dir::Below(d))) => Some(d),
            Some((path, Dir::Outside)) => {
                self.todo(format!("{name}: its code is in {path}, outside this directory: set `workdir` (relative to binky.toml) if it should run there"));
                None
            }
            Some((_, Dir::Here)) => None,
            None => {
                if let Some(w) = working_dir {
                    self.todo(format!("{name}: working_dir {w} is a path inside the container: set `workdir` (relative to binky.toml) if {name} runs elsewhere than here"));
                }
                None
            }
        }
    }

    /// A process service: `[services.X]` with what compose says of it, step by step; what
    /// it maps goes to `mapped` as one line, what it cannot to the TODOs.
    pub(super) fn render_process(&mut self, i: SvcId, out: &mut String) {
        let name = self.svcs[i].name.clone();
        let raw = self.svcs[i].raw.clone();
        let def = self.svcs[i].def.clone();
        let mut notes: Vec<String> = Vec::new();
        if raw != name {
            notes.push(format!("renamed from {raw}"));
        }
        let workdir = self.svcs[i].workdir.clone();
        let cmd = self.host_command(i, &def);
        // A mail catcher: its host command, one per world (a few MiB each; one shared by
        // every world once binky has shared services).
        let shared_tool = def.get("x-binky-shared").and_then(scalar);
        if let Some(tool) = &shared_tool {
            out.push_str(&format!(
                "# {tool} catches this world's mail, on the host (binky runs processes, not images).\n"
            ));
        }
        out.push_str(&format!("[services.{name}]\n"));
        let worker = cmd.as_deref().and_then(crate::workers::recognise);
        self.write_cmd(i, cmd, shared_tool, out, &mut notes);
        if let Some(w) = &workdir {
            out.push_str(&format!("workdir = {}\n", q(w)));
            notes.push(format!("workdir {w}"));
        }
        if !def.contains_key("build") {
            if let Some(image) = &self.svcs[i].image {
                notes.push(format!(
                    "runs on the host, not in {}: its tools must be installed",
                    one_line(image)
                ));
            }
        }
        self.write_url_and_ports(i, out, &mut notes);
        self.write_health(i, out, &mut notes);
        self.write_stopping(&name, &def, worker, out, &mut notes);
        self.write_depends_on(i, out, &mut notes);
        self.write_env_file(&name, &def, workdir.as_deref(), out, &mut notes);
        self.write_env(i, out, &mut notes);
        out.push('\n');
        self.other_keys(i, PROCESS_KEYS);
        self.mapped
            .push(format!("{name}: process; {}", notes.join("; ")));
    }

    /// Compose's `command` as a host command line: its variables interpolated, addresses of
    /// compose services and its own container ports as tokens, credentials as `${env.…}`.
    fn host_command(&mut self, i: SvcId, def: &Mapping) -> Option<String> {
        let name = self.svcs[i].name.clone();
        let host_word = |this: &mut Self, w: &str| {
            let w = this.interpolate(w);
            let w = this.map_addresses(i, None, &w);
            let w = this.self_ports(i, &w, true);
            this.redact(&name, &w)
        };
        match command_of(def)? {
            Command::Shell(s) => Some(host_word(self, &s)),
            Command::Words(ws) => {
                let mut words = Vec::new();
                for w in ws {
                    words.push(shell_word(&host_word(self, &w)));
                }
                Some(words.join(" "))
            }
        }
    }

    /// `cmd`: the host command, or a command that fails on purpose and a TODO when compose
    /// gives none that runs outside its image.
    fn write_cmd(
        &mut self,
        i: SvcId,
        cmd: Option<String>,
        shared_tool: Option<String>,
        out: &mut String,
        notes: &mut Vec<String>,
    ) {
        let name = self.svcs[i].name.clone();
        let image_only = cmd.as_deref().and_then(image_only_command);
        match (&cmd, image_only) {
            (Some(c), None) => {
                if let Some(from) = &self.svcs[i].cmd_from {
                    out.push_str(&format!("# cmd: from {from}\n"));
                }
                out.push_str(&format!("cmd = {}\n", q(c)));
                match (&shared_tool, &self.svcs[i].cmd_from) {
                    (Some(tool), _) => notes.push(format!("{tool} on the host, one per world")),
                    (None, Some(from)) => notes.push(format!("cmd from {from}")),
                    (None, None) => notes.push("cmd from command".into()),
                }
            }
            (cmd, why) => {
                let built = match (&why, &self.svcs[i].workdir) {
                    (Some(why), _) => why.clone(),
                    (None, Some(w)) => format!("compose builds its image from ./{w}"),
                    (None, None) => "compose gives no command".to_owned(),
                };
                out.push_str(&format!(
                    "# TODO: the command that starts {name} ({built}; binky runs it on the host)\n"
                ));
                if let Some(c) = cmd {
                    out.push_str(&format!("# compose's command: {}\n", one_line(c)));
                }
                out.push_str(&format!(
                    "cmd = {}\n",
                    q(&format!("{TODO_CMD} {name} on the host"))
                ));
                let listen = if self.layouts[i].slots.is_empty() {
                    String::new()
                } else {
                    " and have it listen on ${self.port} (binky also sets PORT)".to_owned()
                };
                self.todo(format!("{name}: set `cmd` to the command that starts it on the host{listen}; until then it fails on purpose"));
                notes.push("cmd TODO".into());
            }
        }
    }

    /// `url` and `ports`, from the service's port layout.
    fn write_url_and_ports(&self, i: SvcId, out: &mut String, notes: &mut Vec<String>) {
        let name = &self.svcs[i].name;
        let layout = &self.layouts[i];
        let slots = &layout.slots;
        if slots.is_empty() {
            return;
        }
        let sub = dns_label(name);
        if slots.len() == 1 && layout.url {
            if sub == *name {
                out.push_str("url = true\n");
            } else {
                out.push_str(&format!("url = {}\n", q(&sub)));
            }
            notes.push(format!("url (port {})", slots[0].0));
        } else {
            if layout.url {
                out.push_str(&format!("url = {{ http = {} }}\n", q(&sub)));
            }
            let labels: Vec<String> = slots.iter().map(|(_, l)| l.clone()).collect();
            out.push_str(&format!("ports = {}\n", toml_list(&labels)));
            let desc: Vec<String> = slots.iter().map(|(p, l)| format!("{l} = {p}")).collect();
            notes.push(format!(
                "{}ports {}",
                if layout.url { "url, " } else { "" },
                desc.join(", ")
            ));
        }
    }

    /// `health`, from a healthcheck that probes one of its own ports over HTTP; any other
    /// healthcheck is a TODO.
    fn write_health(&mut self, i: SvcId, out: &mut String, notes: &mut Vec<String>) {
        let name = self.svcs[i].name.clone();
        match self.healthcheck(i) {
            Probe::None => {}
            Probe::Http { port, rest } => {
                if let Some(tok) = self.layouts[i].token("self", port) {
                    let rest = self.redact(&name, &rest);
                    out.push_str(&format!(
                        "health = {}\n",
                        q(&format!("http://localhost:{tok}{rest}"))
                    ));
                    notes.push("health from healthcheck".into());
                }
            }
            Probe::Other(text) => {
                let text = self.redact(&name, &text);
                self.todo(format!("{name}: healthcheck `{text}` not translated: add health = {{ cmd = \"…\" }} (or http/tcp) if readiness matters; without it binky waits for the port"));
            }
        }
    }

    /// `restart`, `stop_signal` and `stop_grace_period`: compose's keys are binky's (a
    /// Celery worker stops at once on QUIT; on TERM it waits out the grace period and is
    /// killed). A `worker` binky knows by its command and compose gives no signal for gets
    /// the one it stops on at once.
    fn write_stopping(
        &mut self,
        name: &str,
        def: &Mapping,
        worker: Option<crate::workers::Worker>,
        out: &mut String,
        notes: &mut Vec<String>,
    ) {
        if let Some(r) = def.get("restart").and_then(scalar) {
            if matches!(r.as_str(), "always" | "unless-stopped") {
                out.push_str("restart = \"always\"\n");
            }
        }
        if let Some(raw) = def.get("stop_signal").and_then(scalar) {
            let sig = self.interpolate(&raw);
            match crate::config::parse_signal(&sig) {
                Ok(signal) => {
                    out.push_str(&format!("stop_signal = {}\n", q(&signal)));
                    notes.push(format!("stop_signal {signal}"));
                }
                Err(why) => self.todo(format!(
                    "{name}: stop_signal `{sig}` not carried over ({why}): binky stops it with SIGTERM until `stop_signal` names a signal, e.g. \"SIGQUIT\""
                )),
            }
        } else if let Some(w) = worker {
            out.push_str(&format!(
                "stop_signal = {}  # {}: {}\n",
                q(w.signal),
                w.what,
                w.why
            ));
            notes.push(format!("stop_signal {} ({})", w.signal, w.what));
        }
        if let Some(raw) = def.get("stop_grace_period").and_then(scalar) {
            let text = self.interpolate(&raw);
            match compose_duration(&text) {
                Some(grace) => {
                    out.push_str(&format!("stop_grace_period = {}\n", q(&grace)));
                    notes.push(format!("stop_grace_period {grace}"));
                }
                None => self.todo(format!(
                    "{name}: stop_grace_period `{text}` not carried over (not a duration): binky gives it 5 s until `stop_grace_period` says, e.g. \"10s\""
                )),
            }
        }
    }

    /// `depends_on`, with the services it names that are not in binky.toml noted as dropped.
    fn write_depends_on(&mut self, i: SvcId, out: &mut String, notes: &mut Vec<String>) {
        let (deps, dropped) = self.depends_on(i);
        if !deps.is_empty() {
            out.push_str(&format!("depends_on = {}\n", toml_list(&deps)));
            notes.push(format!("depends_on {}", deps.join(", ")));
        }
        if !dropped.is_empty() {
            notes.push(format!(
                "depends_on {} dropped (not in binky.toml)",
                dropped.join(", ")
            ));
        }
    }

    /// `env_file`, relative to the service's workdir; a TODO for files whose addresses of
    /// compose services stay as they are.
    fn write_env_file(
        &mut self,
        name: &str,
        def: &Mapping,
        workdir: Option<&str>,
        out: &mut String,
        notes: &mut Vec<String>,
    ) {
        let env_files: Vec<String> = string_list_env_file(def)
            .iter()
            .map(|f| self.interpolate(f))
            .map(|f| rebase(&f, workdir))
            .collect();
        if env_files.is_empty() {
            return;
        }
        out.push_str(&format!("env_file = {}\n", toml_list(&env_files)));
        notes.push(format!("env_file {}", env_files.join(", ")));
        let others: Vec<&String> = string_list_env_file(def)
            .iter()
            .zip(&env_files)
            // `.env`, and files binky init read (their addresses are rewritten below),
            // need nothing more.
            .filter(|(orig, _)| {
                normalise(orig) != Dir::Below(".env".into())
                    && !self.repo.env_files.contains_key(*orig)
            })
            .map(|(_, f)| f)
            .collect();
        if !others.is_empty() {
            let list: Vec<&str> = others.iter().map(|s| s.as_str()).collect();
            self.todo(format!("{name}: env_file {} is loaded as it is: an address of a compose service in it (such as db:5432) does not resolve on the host; override it in [services.{name}.env] with a token such as ${{db.url}}", list.join(", ")));
        }
    }

    /// `[services.X.env]`, or its placeholder while [`Init::render_services`] collects what
    /// every process shares.
    fn write_env(&mut self, i: SvcId, out: &mut String, notes: &mut Vec<String>) {
        let lines = self.env_lines(i);
        if lines.is_empty() {
            return;
        }
        let mapped: Vec<String> = lines
            .iter()
            .filter_map(|l| {
                let v = l.value.as_ref()?;
                (v.contains("${") && !v.contains("${self.")).then(|| format!("{} → {v}", l.key))
            })
            .collect();
        if !mapped.is_empty() {
            notes.push(format!("env {}", mapped.join(", ")));
        }
        if self.defer_env {
            out.push_str(&env_placeholder(i));
            self.env_blocks.insert(i, lines);
        } else {
            let name = &self.svcs[i].name;
            out.push_str(&env_table(
                &format!("services.{name}.env"),
                &lines,
                &BTreeMap::new(),
            ));
        }
    }
}

/// How binky reaches an adapter's server: the one it runs itself, or `${env.X_ADMIN_URL}`.
struct Admin {
    /// `X_ADMIN_URL`.
    var: String,
    /// An admin address for the comment, at the port compose publishes when it does.
    example: String,
    /// The server binky runs itself for this adapter, when it does.
    server: Option<&'static str>,
}

impl Admin {
    fn of(adapter: &str, name: &str, def: &Mapping) -> Admin {
        let host_port = def.get("ports").and_then(|p| match p {
            Value::Sequence(items) => items.iter().find_map(|s| {
                let s = scalar(s)?;
                let parts: Vec<&str> = s.split(':').collect();
                (parts.len() >= 2)
                    .then(|| parts[parts.len() - 2].parse().ok())
                    .flatten()
            }),
            _ => None,
        });
        Admin {
            var: format!("{}_ADMIN_URL", name.to_ascii_uppercase().replace('-', "_")),
            example: admin_example(adapter, host_port),
            server: managed_server(adapter),
        }
    }

    /// The comment on who runs the server, and how to point binky at another.
    fn write_comment(&self, out: &mut String) {
        let Admin { var, example, .. } = self;
        if let Some(server) = self.server {
            out.push_str(&format!("# binky runs {server} for it, from the installed binaries. To use a server you\n# already run instead: admin_url = \"${{env.{var}}}\" (e.g. {example}).\n"));
        } else {
            out.push_str(&format!("# {var}: the shared server's admin address, e.g. {example}.\n# binky runs only PostgreSQL, Redis and MariaDB itself when admin_url is left out.\n"));
        }
    }
}

/// Where [`Init::render_process`] leaves the env table of service `i` while
/// [`Init::render_services`] finds what every process shares.
pub(super) fn env_placeholder(i: SvcId) -> String {
    format!("\u{1}env of service {}\u{1}", i.0)
}

/// `[table]` with `lines`, less the entries `skip` has with the same value (nothing at all
/// when no line is left).
fn env_table(table: &str, lines: &[EnvLine], skip: &BTreeMap<String, String>) -> String {
    let kept: Vec<&EnvLine> = lines
        .iter()
        .filter(|l| l.value.is_none() || l.value.as_ref() != skip.get(&l.key))
        .collect();
    if kept.is_empty() {
        return String::new();
    }
    let mut out = format!("\n[{table}]\n");
    for l in kept {
        if let Some(c) = &l.comment {
            out.push_str(&format!("# {}\n", one_line(c)));
        }
        if let Some(v) = &l.value {
            out.push_str(&format!("{} = {}\n", toml_key(&l.key), q(v)));
        }
    }
    out
}

/// The env entries every one of two or more process services sets to the same value, with
/// no comment of their own and no `${self.…}` (which means each service's own).
fn shared_env(blocks: &BTreeMap<SvcId, Vec<EnvLine>>) -> BTreeMap<String, String> {
    if blocks.len() < 2 {
        return BTreeMap::new();
    }
    let plain = |lines: &Vec<EnvLine>| -> BTreeMap<String, String> {
        lines
            .iter()
            .filter(|l| l.comment.is_none())
            .filter_map(|l| Some((l.key.clone(), l.value.clone()?)))
            .filter(|(_, v)| !v.contains("${self."))
            .collect()
    };
    let mut all = blocks.values().map(plain);
    let mut shared = all.next().unwrap_or_default();
    for other in all {
        shared.retain(|k, v| other.get(k) == Some(v));
    }
    shared
}

/// Compose service keys that both renderings map, or that mean nothing on the host.
pub(super) const SERVICE_KEYS: &[&str] = &[
    "build",
    "command",
    "container_name",
    "depends_on",
    "env_file",
    "environment",
    "expose",
    "healthcheck",
    "hostname",
    "image",
    "labels",
    "links",
    "logging",
    "platform",
    "ports",
    "pull_policy",
    "restart",
    "stop_grace_period",
    "stop_signal",
];

/// Beside [`SERVICE_KEYS`], the keys [`Init::render_process`] maps or that mean nothing on
/// the host.
pub(super) const PROCESS_KEYS: &[&str] = &["init", "stdin_open", "tty", "working_dir"];

/// Beside [`SERVICE_KEYS`], the keys of an adapter service that a slice makes moot (or
/// that [`Init::render_adapter`] reports itself).
pub(super) const ADAPTER_KEYS: &[&str] = &["volumes"];

/// A compose duration (Go's form: `10s`, `1m30s`, `500ms`, `1.5h`; a bare number is seconds)
/// in binky's (`90s`, `500ms`); `None` when it is not one.
pub(super) fn compose_duration(text: &str) -> Option<String> {
    let t = text.trim();
    if let Ok(secs) = t.parse::<f64>() {
        return ms_text(secs * 1000.0);
    }
    let mut ms = 0.0;
    let mut rest = t;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let value: f64 = rest[..num_end].parse().ok()?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let per_ms = match &rest[..unit_end] {
            "ns" => 1e-6,
            "us" | "µs" => 1e-3,
            "ms" => 1.0,
            "s" => 1000.0,
            "m" => 60_000.0,
            "h" => 3_600_000.0,
            _ => return None,
        };
        ms += value * per_ms;
        rest = &rest[unit_end..];
    }
    ms_text(ms)
}

/// Milliseconds as binky writes a duration: whole seconds as `90s`, else `1500ms`.
fn ms_text(ms: f64) -> Option<String> {
    if !ms.is_finite() || ms < 0.0 {
        return None;
    }
    let ms = ms.round() as u64;
    Some(if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    })
}
