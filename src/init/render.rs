//! Writing the services, the env, the TODOs and the header.

use super::*;

impl Init {
    // --- rendering ----------------------------------------------------------------

    pub(super) fn render_services(&mut self) -> String {
        let mut out = String::new();
        let adapters: Vec<usize> = (0..self.svcs.len())
            .filter(|&i| matches!(self.svcs[i].kind, Kind::Adapter(_)))
            .collect();
        if !adapters.is_empty() {
            out.push_str("# Adapter services: every world gets its own slice (a database, a key prefix, …)\n# of one shared server.\n\n");
        }
        for i in adapters {
            self.render_adapter(i, &mut out);
        }
        for i in 0..self.svcs.len() {
            match self.svcs[i].kind {
                Kind::Process => self.render_process(i, &mut out),
                Kind::Unmapped => self.unmapped(i),
                Kind::Replaced(what) => self.replaced(i, what, &mut out),
                Kind::Adapter(_) => {}
            }
        }
        out
    }

    pub(super) fn in_output(&self, j: usize) -> bool {
        !matches!(self.svcs[j].kind, Kind::Unmapped | Kind::Replaced(_))
    }

    /// Infrastructure binky replaces: a comment in the file, no service.
    pub(super) fn replaced(&mut self, i: usize, what: &str, out: &mut String) {
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
    pub(super) fn depends_on(&mut self, i: usize) -> (Vec<String>, Vec<String>) {
        let names: Vec<String> = match self.svcs[i].def.get("depends_on") {
            Some(Value::Mapping(m)) => m.keys().filter_map(scalar).collect(),
            v => string_list(v),
        };
        let mut kept = Vec::new();
        let mut dropped = Vec::new();
        for d in names {
            match self.svcs.iter().position(|s| s.raw == d) {
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

    pub(super) fn render_adapter(&mut self, i: usize, out: &mut String) {
        let Kind::Adapter(adapter) = self.svcs[i].kind else {
            return;
        };
        let name = self.svcs[i].name.clone();
        let image = self.svcs[i].image.clone().unwrap_or_default();
        let def = self.svcs[i].def.clone();
        let var = format!("{}_ADMIN_URL", name.to_ascii_uppercase().replace('-', "_"));
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
        let example = admin_example(adapter, host_port);
        let runs_itself = managed_server(adapter);
        let why = if let Some(server) = runs_itself {
            format!("the admin address of {name}'s server, e.g. {example} (or delete admin_url and binky runs {server} itself)")
        } else {
            format!("the admin address of {name}'s server, e.g. {example}")
        };
        self.reason(&var, why);

        let mut container_bits: Vec<&str> = Vec::new();
        if !env_entries(&def).is_empty() {
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
        out.push_str(&format!("[services.{name}]\n"));
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
        if let Some(server) = runs_itself {
            out.push_str(&format!("# binky can also run {server} itself: leave admin_url out and it starts one from the\n# installed binaries.\n"));
        } else {
            out.push_str(&format!("# {var}: the shared server's admin address, e.g. {example}.\n# binky runs only PostgreSQL, Redis and MariaDB itself when admin_url is left out.\n"));
        }
        out.push_str(&format!("adapter = {}\n", q(adapter)));
        out.push_str(&format!("admin_url = {}\n", q(&format!("${{env.{var}}}"))));
        let (deps, _) = self.depends_on(i);
        if !deps.is_empty() {
            out.push_str(&format!("depends_on = {}\n", toml_list(&deps)));
        }
        if adapter == "postgres" {
            out.push_str("# migrate = \"psql \\\"$DATABASE_URL\\\" -v ON_ERROR_STOP=1 -f schema.sql\"\n# seed = \"…\"\n# clone_from = \"golden\"   # migrate and seed once; every world is a server-side copy\n");
        }
        out.push('\n');

        // What the container had that a slice does not need, and what it might.
        let raw = self.svcs[i].raw.clone();
        for (src, dst) in volumes(&def) {
            if dst.contains("docker-entrypoint-initdb.d") {
                let src = self.redact(&name, &src);
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
        self.other_keys(i, ADAPTER_KEYS);
        let admin = if let Some(server) = runs_itself {
            format!("admin_url = ${{env.{var}}}, or none and binky runs {server}")
        } else {
            format!("admin_url = ${{env.{var}}}")
        };
        let renamed = if raw != name {
            format!(" (renamed from {raw})")
        } else {
            String::new()
        };
        self.mapped.push(format!(
            "{name}{renamed}: image {} → adapter {adapter} ({admin})",
            one_line(&image)
        ));
    }

    pub(super) fn unmapped(&mut self, i: usize) {
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

    pub(super) fn workdir(&mut self, i: usize) -> Option<String> {
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

    pub(super) fn render_process(&mut self, i: usize, out: &mut String) {
        let name = self.svcs[i].name.clone();
        let raw = self.svcs[i].raw.clone();
        let def = self.svcs[i].def.clone();
        let mut notes: Vec<String> = Vec::new();
        if raw != name {
            notes.push(format!("renamed from {raw}"));
        }
        let workdir = self.workdir(i);

        // cmd
        let cmd = match command_of(&def) {
            Some(Command::Shell(s)) => {
                let s = self.interpolate(&s);
                let s = self.map_addresses(i, None, &s);
                let s = self.self_ports(i, &s, true);
                Some(self.redact(&name, &s))
            }
            Some(Command::Words(ws)) => {
                let mut words = Vec::new();
                for w in ws {
                    let w = self.interpolate(&w);
                    let w = self.map_addresses(i, None, &w);
                    let w = self.self_ports(i, &w, true);
                    let w = self.redact(&name, &w);
                    words.push(shell_word(&w));
                }
                Some(words.join(" "))
            }
            None => None,
        };
        // A mail catcher: its host command, one per world (a few MiB each; one shared by
        // every world once binky has shared services).
        let shared_tool = def.get("x-binky-shared").and_then(scalar);
        if let Some(tool) = &shared_tool {
            out.push_str(&format!(
                "# {tool} catches this world's mail, on the host: install it there (binky runs\n# processes, not images).\n"
            ));
        }
        out.push_str(&format!("[services.{name}]\n"));
        let image_only = cmd.as_deref().and_then(image_only_command);
        match (&cmd, image_only) {
            (Some(c), None) => {
                out.push_str(&format!("cmd = {}\n", q(c)));
                match &shared_tool {
                    Some(tool) => notes.push(format!("{tool} on the host, one per world")),
                    None => notes.push("cmd from command".into()),
                }
            }
            (cmd, why) => {
                let built = match (&why, &workdir) {
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

        // url and ports
        let layout = &self.layouts[i];
        let slots = layout.slots.clone();
        if !slots.is_empty() {
            let sub = dns_label(&name);
            if slots.len() == 1 && layout.url {
                if sub == name {
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

        // health
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

        // restart
        if let Some(r) = def.get("restart").and_then(scalar) {
            if matches!(r.as_str(), "always" | "unless-stopped") {
                out.push_str("restart = \"always\"\n");
            }
        }

        // depends_on
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

        // env_file
        let env_files: Vec<String> = string_list_env_file(&def)
            .iter()
            .map(|f| self.interpolate(f))
            .map(|f| rebase(&f, workdir.as_deref()))
            .collect();
        if !env_files.is_empty() {
            out.push_str(&format!("env_file = {}\n", toml_list(&env_files)));
            notes.push(format!("env_file {}", env_files.join(", ")));
            let others: Vec<&String> = string_list_env_file(&def)
                .iter()
                .zip(&env_files)
                // `.env`, and files binky init read (their addresses are rewritten below),
                // need nothing more.
                .filter(|(orig, _)| {
                    normalise(orig) != Dir::Below(".env".into())
                        && !self.env_files.contains_key(*orig)
                })
                .map(|(_, f)| f)
                .collect();
            if !others.is_empty() {
                let list: Vec<&str> = others.iter().map(|s| s.as_str()).collect();
                self.todo(format!("{name}: env_file {} is loaded as it is: an address of a compose service in it (such as db:5432) does not resolve on the host; override it in [services.{name}.env] with a token such as ${{db.url}}", list.join(", ")));
            }
        }

        // env
        let lines = self.env_lines(i);
        if !lines.is_empty() {
            out.push_str(&format!("\n[services.{name}.env]\n"));
            let mut mapped = Vec::new();
            for l in &lines {
                if let Some(c) = &l.comment {
                    out.push_str(&format!("# {}\n", one_line(c)));
                }
                if let Some(v) = &l.value {
                    out.push_str(&format!("{} = {}\n", toml_key(&l.key), q(v)));
                    if v.contains("${") && !v.contains("${self.") {
                        mapped.push(format!("{} → {v}", l.key));
                    }
                }
            }
            if !mapped.is_empty() {
                notes.push(format!("env {}", mapped.join(", ")));
            }
        }
        out.push('\n');
        self.other_keys(i, PROCESS_KEYS);
        self.mapped
            .push(format!("{name}: process; {}", notes.join("; ")));
    }

    pub(super) fn env_lines(&mut self, i: usize) -> Vec<EnvLine> {
        let def = self.svcs[i].def.clone();
        let entries = env_entries(&def);
        // PostgreSQL's address in parts: `DB_HOST: db` makes DB_PORT, DB_USER, DB_PASSWORD
        // and DB_NAME the slice's too.
        let mut families: Vec<(String, String)> = Vec::new();
        for (k, v) in &entries {
            let Some(v) = v else { continue };
            let upper = k.to_ascii_uppercase();
            let Some(prefix) = upper.strip_suffix("HOST") else {
                continue;
            };
            if prefix.trim_end_matches('_').is_empty() {
                continue;
            }
            let v = self.interpolate(v);
            if let Some(&j) = self.alias.get(&v.trim().to_ascii_lowercase()) {
                if self.svcs[j].kind == Kind::Adapter("postgres") {
                    families.push((
                        prefix.trim_end_matches('_').to_owned(),
                        self.svcs[j].name.clone(),
                    ));
                }
            }
        }
        let mut lines = Vec::new();
        let keys: BTreeSet<String> = entries.iter().map(|(k, _)| k.clone()).collect();
        for (k, raw) in entries {
            let Some(raw) = raw else {
                lines.push(EnvLine {
                    key: k.clone(),
                    value: None,
                    comment: Some(format!("{k}: inherited from the environment of `binky up`")),
                });
                continue;
            };
            if let Some(v) = family_member(&k, &families) {
                lines.push(EnvLine {
                    key: k,
                    value: Some(v),
                    comment: None,
                });
                continue;
            }
            let v = self.interpolate(&raw);
            let v = self.map_addresses(i, Some(&k), &v);
            let secret = (secret_name(&k) && !literal_part(&v).trim().is_empty())
                || looks_secret(&v)
                || self.secrets.iter().any(|(s, _)| v.contains(s.as_str()));
            if secret {
                let var = single_reference(&raw).unwrap_or_else(|| k.clone());
                let from_dotenv = if self.vars.contains_key(&var) {
                    " (.env has it)"
                } else {
                    ""
                };
                self.reason(
                    &var,
                    format!("a credential: not copied into binky.toml{from_dotenv}"),
                );
                lines.push(EnvLine {
                    value: Some(format!("${{env.{var}}}")),
                    comment: Some(format!("{k} looked like a credential: not copied; set {var} in the environment of `binky up` (or an env_file)")),
                    key: k,
                });
                continue;
            }
            // `JWT_SECRET: ${JWT_SECRET}` is a reference already: say what to set.
            let comment = env_reference(&v)
                .filter(|_| secret_name(&k))
                .map(|var| {
                    format!(
                        "{k} is a credential: set {var} in the environment of `binky up` (or an env_file){}",
                        if self.vars.contains_key(var) { "; .env has it" } else { "" }
                    )
                });
            let anywhere = k.to_ascii_uppercase().contains("PORT");
            let v = self.self_ports(i, &v, anywhere);
            if let Some(line) = allowed_hosts(&k, &v, "compose") {
                lines.push(line);
                continue;
            }
            lines.push(EnvLine {
                key: k,
                value: Some(v),
                comment,
            });
        }
        // compose hands `.env` (or another env_file) to the service: its addresses of
        // compose services are pointed at binky's (`REDIS_URL=redis://redis:6379/0`), the rest
        // binky loads from the file as it is.
        let mut from_files: Vec<(String, String, String)> = Vec::new();
        if self.loads_dotenv(i) {
            for (k, v) in self.dotenv.clone() {
                from_files.push((".env".into(), k, v));
            }
        }
        for f in string_list_env_file(&def) {
            if normalise(&f) == Dir::Below(".env".into()) {
                continue;
            }
            if let Some(text) = self.env_files.get(&f) {
                for (k, v) in binky_controllers::env::parse_dotenv(text) {
                    from_files.push((f.clone(), k, v));
                }
            }
        }
        // PostgreSQL's address in parts in a file (`POSTGRES_HOST=postgres`).
        let mut file_families: Vec<(String, String)> = Vec::new();
        for (_, k, v) in &from_files {
            let upper = k.to_ascii_uppercase();
            if let Some(prefix) = upper.strip_suffix("HOST") {
                let prefix = prefix.trim_end_matches('_');
                if let Some(&j) = self.alias.get(&v.trim().to_ascii_lowercase()) {
                    if !prefix.is_empty() && self.svcs[j].kind == Kind::Adapter("postgres") {
                        file_families.push((prefix.to_owned(), self.svcs[j].name.clone()));
                    }
                }
            }
        }
        let mut seen: BTreeSet<String> = BTreeSet::new();
        for (file, k, val) in from_files {
            if keys.contains(&k) || !seen.insert(k.clone()) {
                continue;
            }
            if let Some(v) = family_member(&k, &file_families) {
                lines.push(EnvLine {
                    comment: Some(format!(
                        "{k}: {file} points at a compose service; this overrides it"
                    )),
                    key: k,
                    value: Some(v),
                });
                continue;
            }
            if let Some(line) = allowed_hosts(&k, &val, &file) {
                lines.push(line);
                continue;
            }
            let v = self.map_addresses(i, Some(&k), &val);
            if v != val
                && !looks_secret(&v)
                && !self.secrets.iter().any(|(s, _)| v.contains(s.as_str()))
            {
                lines.push(EnvLine {
                    comment: Some(format!(
                        "{k}: {file} points at a compose service; this overrides it"
                    )),
                    key: k,
                    value: Some(v),
                });
            }
        }
        lines
    }

    /// Service keys nobody handled: one TODO each (with advice where there is some).
    pub(super) fn other_keys(&mut self, i: usize, handled: &[&str]) {
        let name = self.svcs[i].name.clone();
        let def = self.svcs[i].def.clone();
        let kind = self.svcs[i].kind;
        let mut generic = Vec::new();
        for key in def.keys().filter_map(scalar) {
            if handled.contains(&key.as_str()) || key.starts_with("x-") {
                continue;
            }
            match key.as_str() {
                "volumes" => {
                    if kind == Kind::Process {
                        let list: Vec<String> = volumes(&def)
                            .into_iter()
                            .map(|(s, d)| if s.is_empty() { d } else { format!("{s}:{d}") })
                            .collect();
                        let list = self.redact(&name, &list.join(", "));
                        self.todo(format!("{name}: volumes {list} not carried: binky runs {name} on the host, in the world's worktree"));
                    }
                }
                "profiles" => {
                    let p = string_list(def.get("profiles")).join(", ");
                    self.todo(format!("{name}: profiles {p}: binky starts every service; put it in a [groups] entry and use `binky up NAME --group G` to start a subset"));
                }
                "deploy" => self.todo(format!("{name}: deploy not carried: binky runs one instance (`limits` is not enforced yet)")),
                "extends" => self.todo(format!("{name}: extends not resolved: copy what it inherits into [services.{name}]")),
                "entrypoint" => self.todo(format!("{name}: entrypoint not carried: if what it does matters on the host, put it in front of cmd")),
                "secrets" | "configs" => self.todo(format!("{name}: {key} not carried: hand them over through the environment of `binky up` or an env_file")),
                "networks" | "network_mode" => {}
                _ => generic.push(key),
            }
        }
        if !generic.is_empty() {
            self.todo(format!(
                "{name}: {} not carried (container settings binky has no equivalent for)",
                generic.join(", ")
            ));
        }
    }

    pub(super) fn top_level(&mut self, root: &Mapping) {
        let mut networks = self.uses_networks;
        for (k, v) in root {
            let Some(k) = scalar(k) else { continue };
            if matches!(k.as_str(), "services" | "version" | "name") || k.starts_with("x-") {
                continue;
            }
            let names: Vec<String> = match v {
                Value::Mapping(m) => m.keys().filter_map(scalar).collect(),
                v => string_list(Some(v)),
            };
            match k.as_str() {
                "volumes" => self.todo(format!("named volumes {} not carried: each world keeps its data in its own slice and runs its processes in its worktree", names.join(", "))),
                "networks" => networks = true,
                "secrets" | "configs" => self.todo(format!("{k} {} not carried: hand them over through the environment of `binky up` or an env_file", names.join(", "))),
                "include" => self.todo(format!("include {} not read: run binky init where those services are, or add them by hand", names.join(", "))),
                _ => self.todo(format!("top-level `{k}` not carried")),
            }
        }
        if networks {
            self.todo("networks not carried: a world's services reach each other on localhost, through tokens such as ${api.url}");
        }
    }

    pub(super) fn finish(mut self, body: &str) -> Generated {
        let mut head = String::new();
        let file = self
            .file
            .rsplit('/')
            .next()
            .unwrap_or(&self.file)
            .to_owned();
        head.push_str(&format!(
            "# binky.toml, written by `binky init` from {}{}.\n",
            file,
            if self.dotenv.is_empty() {
                ""
            } else {
                " and .env"
            }
        ));
        head.push_str("# A starting point, not a conversion: read it, settle the TODOs, then `binky up NAME`.\n");
        head.push_str("# No credential was copied: they are ${env.NAME} references, read from the environment\n# of `binky up` (or an env_file).\n");
        if !self.to_decide.is_empty() {
            head.push_str("#\n# To decide:\n");
            for t in &self.to_decide {
                head.push_str(&format!("# TODO: {t}\n"));
            }
        }
        let mut text = head.clone();
        let project_part = format!("\n[project]\nname = {}\n\n{}", q(&self.project), body);
        text.push_str(&project_part);

        // Every `${env.NAME}` the file reads (comments read nothing).
        let mut names: Vec<String> = Vec::new();
        for line in body.lines().filter(|l| !l.trim_start().starts_with('#')) {
            let mut rest = line;
            while let Some(i) = rest.find("${env.") {
                let after = &rest[i + 6..];
                let n = after
                    .bytes()
                    .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
                    .count();
                let name = after[..n].to_owned();
                if !name.is_empty() && !names.contains(&name) {
                    names.push(name);
                }
                rest = &after[n..];
            }
        }
        let to_set: Vec<(String, String)> = names
            .into_iter()
            .map(|n| {
                let why = self
                    .reasons
                    .get(&n)
                    .cloned()
                    .unwrap_or_else(|| "read by the services".to_owned());
                (n, why)
            })
            .collect();
        if !to_set.is_empty() {
            let list: Vec<&str> = to_set.iter().map(|(n, _)| n.as_str()).collect();
            let set_line = format!("#\n# Set before `binky up`: {}\n", list.join(", "));
            let at = head.len();
            text.insert_str(at, &set_line);
        }

        // The last line of defence: a credential seen anywhere never leaves.
        let secrets = std::mem::take(&mut self.secrets);
        let scrub = |s: &str| {
            let mut s = s.to_owned();
            for (value, name) in &secrets {
                if s.contains(value.as_str()) {
                    s = s.replace(value.as_str(), &format!("${{env.{name}}}"));
                }
            }
            s
        };
        let mut adapters: Vec<String> = Vec::new();
        for s in &self.svcs {
            if let Kind::Adapter(a) = s.kind {
                if !adapters.iter().any(|x| x == a) {
                    adapters.push(a.to_owned());
                }
            }
        }
        Generated {
            toml: scrub(&text),
            mapped: self.mapped.iter().map(|m| scrub(m)).collect(),
            to_decide: self.to_decide.iter().map(|m| scrub(m)).collect(),
            to_set: to_set.into_iter().map(|(n, w)| (n, scrub(&w))).collect(),
            adapters,
        }
    }
}

/// Service keys [`Init::render_process`] maps or that mean nothing on the host.
pub(super) const PROCESS_KEYS: &[&str] = &[
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
    "init",
    "labels",
    "links",
    "logging",
    "platform",
    "ports",
    "pull_policy",
    "restart",
    "stdin_open",
    "stop_grace_period",
    "stop_signal",
    "tty",
    "working_dir",
];

/// Service keys of an adapter service that a slice makes moot (or that
/// [`Init::render_adapter`] reports itself).
pub(super) const ADAPTER_KEYS: &[&str] = &[
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
    "volumes",
];

/// A framework's list of the hosts it answers (Django's `ALLOWED_HOSTS`, as
/// `DJANGO_ALLOWED_HOSTS` or `ALLOWED_HOSTS`, comma-separated) with binky's proxy hosts
/// (`web.<world>.<project>.localhost`) added, or `None` for any other variable.
pub(super) fn allowed_hosts(key: &str, value: &str, from: &str) -> Option<EnvLine> {
    let k = key.to_ascii_uppercase();
    if !(k == "ALLOWED_HOSTS" || k.ends_with("_ALLOWED_HOSTS")) {
        return None;
    }
    let v = value.trim();
    if v == "*" || v.split(',').any(|h| h.trim() == ".localhost") {
        return None;
    }
    let joined = if v.is_empty() {
        ".localhost,127.0.0.1".to_owned()
    } else {
        format!("{v},.localhost")
    };
    Some(EnvLine {
        key: key.to_owned(),
        value: Some(joined),
        comment: Some(format!(
            "{key}: as {from} has it, and .localhost: the proxy sends Host: <service>.<world>.<project>.localhost"
        )),
    })
}
