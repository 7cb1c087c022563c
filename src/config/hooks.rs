//! `[hooks]`: `post_up`, `pre_down`.

use binky_controllers::spec::Hooks;

use super::{Cx, Table};

const HOOKS_KEYS: &[&str] = &["post_up", "pre_down"];

impl Cx<'_> {
    /// The `[hooks]` table of `root`.
    pub(super) fn hooks(&mut self, root: &Table<'_>) -> Hooks {
        let mut hooks = Hooks::default();
        if let Some(v) = Self::get(root, "hooks") {
            if let Some(t) = self.expect_table(v, "hooks") {
                self.unknown_keys(t, "hooks", HOOKS_KEYS);
                hooks.post_up = self.string(t, "hooks", "post_up");
                hooks.pre_down = self.string(t, "hooks", "pre_down");
            }
        }
        hooks
    }
}
