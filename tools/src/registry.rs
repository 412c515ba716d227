//! The tool-family registry: for each setting kind, the family of tools it
//! offers. A family lists [`ToolSet`]s (a desktop lists the screen tools,
//! the sandbox's, the page tools and the common ones); each tool is one
//! [`ToolDef`] entry in exactly one set, so a tool added to a set is listed
//! by every family that lists the set.
//!
//! The server asks [`registry()`] for the family of its session's kind and
//! lists and calls through it; it never names a family or a tool. A tool is
//! listed when what it [`Needs`] is in the computer's [`Offer`] (a group
//! hello declares, or a provider that can move the deadline).
//!
//! rmcp's `ToolRouter` is not used: its listing is sorted by name (the
//! order a model reads, and the golden file, is the family's order), its
//! tools are fixed values while ours state the server's limits
//! ([`ToolSettings`]), it lists every tool while ours are filtered per
//! computer, and its handlers take rmcp's request context where ours take
//! a [`ToolContext`] (which unit tests build without a peer).

use computerd::protocol::{Group, SettingKind};
use futures::future::BoxFuture;
use rmcp::ErrorData;
use rmcp::model::{CallToolResult, JsonObject, Tool};
use serde_json::Value;

use crate::error::{Result, ToolError};
use crate::together::Together;
use crate::{ToolContext, ToolSettings, browser, desktop, phone, sandbox};

/// Every family, one entry per setting kind that has one.
const FAMILIES: &[Family] = &[
    sandbox::FAMILY,
    desktop::FAMILY,
    browser::FAMILY,
    phone::FAMILY,
];

/// The registry of every family this crate has.
pub fn registry() -> &'static Registry {
    static REGISTRY: Registry = Registry::new(FAMILIES);
    &REGISTRY
}

/// Whether a computer that declares `groups` offers the group `needed`.
/// The one place a needed group is compared with declared ones.
pub fn offered(needed: Group, groups: &[Group]) -> bool {
    groups.contains(&needed)
}

/// The families, by setting kind.
#[derive(Debug)]
pub struct Registry {
    families: &'static [Family],
}

impl Registry {
    /// A registry of `families`, at most one per kind (the first wins; a
    /// test holds the crate's table to one).
    pub const fn new(families: &'static [Family]) -> Registry {
        Registry { families }
    }

    /// The family of `kind`, if this crate has one.
    pub fn family(&self, kind: SettingKind) -> Option<&'static Family> {
        self.families.iter().find(|f| f.kind == kind)
    }

    /// Every family, in table order.
    pub fn families(&self) -> &'static [Family] {
        self.families
    }

    /// The families whose skills a session of `kind` is offered: its own
    /// first, then every family whose tools it lists all of (a desktop
    /// lists the sandbox's and a browser's tools; a sandbox lists neither
    /// of theirs, so it is never pointed at their skills).
    pub fn skilled_for(&self, kind: SettingKind) -> Vec<&'static Family> {
        let Some(own) = self.family(kind) else {
            return Vec::new();
        };
        let lists = |name: &str| own.tools().any(|t| t.name == name);
        let mut out = vec![own];
        out.extend(
            self.families
                .iter()
                .filter(|f| f.kind != kind && f.tools().all(|t| lists(t.name))),
        );
        out
    }
}

/// A setting kind and the sets of tools it offers, in the order they are
/// listed.
#[derive(Debug)]
pub struct Family {
    pub kind: SettingKind,
    /// The server's MCP instructions for a session of this kind.
    pub instructions: &'static str,
    /// Its `SKILL.md` ([`crate::skills`]), served as a prompt and a resource.
    pub skill: &'static str,
    pub sets: &'static [ToolSet],
    /// Members listed as one tool each group ([`Together`]), where one by
    /// one they would not fit the kind's listing budget.
    pub together: &'static [Together],
}

/// Tools that go together (the sandbox's, the page tools), defined once and
/// listed by every family that offers them.
#[derive(Clone, Copy, Debug)]
pub struct ToolSet {
    /// What the set is, for test messages (`sandbox`, `page`).
    pub name: &'static str,
    pub tools: &'static [ToolDef],
    /// Second names the set answers to without listing them (another
    /// server's vocabulary, [`Alias`]).
    pub aliases: &'static [Alias],
}

/// A name a family answers to but does not list: another server's tool
/// name that models were trained on (Playwright MCP's `browser_press_key`),
/// taking that server's arguments and calling the listed tool `of` (one
/// definition; the alias only reads the other vocabulary), or a rarely
/// needed act whose schema is not worth a place in every `tools/list`
/// (named by the instructions instead). Offered when `of` is.
#[derive(Clone, Copy)]
pub struct Alias {
    pub name: &'static str,
    /// The listed tool whose work it does, or that it is offered with.
    pub of: &'static str,
    pub call: Handler,
}

impl std::fmt::Debug for Alias {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Alias")
            .field("name", &self.name)
            .field("of", &self.of)
            .finish_non_exhaustive()
    }
}

/// What a tool needs of the computer to be listed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    /// Nothing: always listed.
    Nothing,
    /// A capability group the computer declares.
    Group(Group),
    /// Every one of these groups (a browser's file upload needs the page and
    /// the computer's files both).
    All(&'static [Group]),
    /// A provider that can move the computer's deadline.
    Extend,
}

/// What a computer offers the tools: its declared groups, and whether its
/// provider can move its deadline. Known from the provider before any
/// computer exists, so listing makes no computer.
#[derive(Clone, Copy, Debug)]
pub struct Offer<'a> {
    pub groups: &'a [Group],
    pub extend: bool,
}

impl Needs {
    pub fn met_by(self, offer: &Offer<'_>) -> bool {
        match self {
            Needs::Nothing => true,
            Needs::Group(g) => offered(g, offer.groups),
            Needs::All(gs) => gs.iter().all(|g| offered(*g, offer.groups)),
            Needs::Extend => offer.extend,
        }
    }
}

/// A tool's handler: its arguments as JSON (parsed by the handler, which
/// names the field at fault) and the call's context. Made from a typed
/// `async fn(&ToolContext, Args) -> Result<CallToolResult>` by `handler!`.
pub type Handler =
    for<'a> fn(&'a ToolContext, &'static str, Value) -> BoxFuture<'a, Result<CallToolResult>>;

/// One tool: everything about it in one entry.
#[derive(Clone, Copy)]
pub struct ToolDef {
    pub name: &'static str,
    pub needs: Needs,
    /// The tool as listed, named `name`: schemas from its args and result
    /// types (`make_tool`), a description stating the settings, annotations.
    pub build: fn(&'static str, &ToolSettings) -> Tool,
    pub call: Handler,
}

impl ToolDef {
    pub const fn new(
        name: &'static str,
        needs: Needs,
        build: fn(&'static str, &ToolSettings) -> Tool,
        call: Handler,
    ) -> ToolDef {
        ToolDef {
            name,
            needs,
            build,
            call,
        }
    }

    /// The tool as listed with `settings`.
    pub fn tool(&self, settings: &ToolSettings) -> Tool {
        (self.build)(self.name, settings)
    }
}

impl std::fmt::Debug for ToolDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolDef")
            .field("name", &self.name)
            .field("needs", &self.needs)
            .finish_non_exhaustive()
    }
}

/// A [`Handler`] from a typed async fn `f(&ToolContext, Args)`: the JSON
/// arguments are parsed into `Args` first, with words naming the field.
macro_rules! handler {
    ($f:path) => {
        |ctx, name, args| Box::pin(async move { $f(ctx, $crate::define::parse(name, args)?).await })
    };
}
pub(crate) use handler;

impl Family {
    /// Every entry of every set, in listing order.
    pub fn tools(&self) -> impl Iterator<Item = &'static ToolDef> + use<> {
        self.sets.iter().flat_map(|s| s.tools)
    }

    /// The entries `offer` allows, in order.
    pub fn offered<'a>(
        &'a self,
        offer: &'a Offer<'a>,
    ) -> impl Iterator<Item = &'static ToolDef> + 'a {
        self.tools().filter(|t| t.needs.met_by(offer))
    }

    /// The tools `offer` allows, stating `settings` in their descriptions
    /// and schemas: each one by one, but members of a [`Together`] as its
    /// one tool, where the first of them would stand. Every one takes the
    /// `computer` argument ([`crate::fleet`]), which the server takes out
    /// before [`Family::call`]. Output schemas only with
    /// `settings.output_schemas`.
    pub fn list(&self, offer: &Offer<'_>, settings: &ToolSettings) -> Vec<Tool> {
        let mut out = Vec::new();
        for entry in self.listed(offer) {
            let mut tool = match entry {
                Listed::One(t) => t.tool(settings),
                Listed::Together(g) => {
                    let members: Vec<Tool> = self
                        .offered(offer)
                        .filter(|t| g.contains(t.name))
                        .map(|t| crate::fleet::with_computer_arg(t.tool(settings)))
                        .collect();
                    g.tool(&members)
                }
            };
            if !settings.output_schemas {
                tool.output_schema = None;
            }
            out.push(crate::fleet::with_computer_arg(tool));
        }
        out
    }

    /// What `offer` lists, in order: tools one by one, and each
    /// [`Together`] with an offered member once, where its first stands.
    fn listed(&self, offer: &Offer<'_>) -> Vec<Listed> {
        let mut out: Vec<Listed> = Vec::new();
        for t in self.offered(offer) {
            match self.together.iter().find(|g| g.contains(t.name)) {
                None => out.push(Listed::One(t)),
                Some(g) => {
                    if !out
                        .iter()
                        .any(|l| matches!(l, Listed::Together(h) if h.name == g.name))
                    {
                        out.push(Listed::Together(g));
                    }
                }
            }
        }
        out
    }

    /// The names `offer` lists (no schema is built).
    pub fn names(&self, offer: &Offer<'_>) -> Vec<&'static str> {
        self.listed(offer)
            .iter()
            .map(|l| match l {
                Listed::One(t) => t.name,
                Listed::Together(g) => g.name,
            })
            .collect()
    }

    /// Whether `name` is offered to `offer`: a tool it allows (listed by
    /// itself or inside a [`Together`]), an alias of one, or a
    /// [`Together`] with a member it allows.
    pub fn offers(&self, name: &str, offer: &Offer<'_>) -> bool {
        if let Some(g) = self.together(name) {
            return self.offered(offer).any(|t| g.contains(t.name));
        }
        let of = self.alias(name).map_or(name, |a| a.of);
        self.offered(offer).any(|t| t.name == of)
    }

    /// The [`Together`] named `name`.
    pub fn together(&self, name: &str) -> Option<&'static Together> {
        self.together.iter().find(|g| g.name == name)
    }

    /// A call of a [`Together`]'s one tool as the call of the member its
    /// action names, checked against `offer` (words for the model when it
    /// names none); any other call as it is.
    pub fn unfold(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        offer: &Offer<'_>,
    ) -> std::result::Result<(String, Option<JsonObject>), String> {
        match self.together(name) {
            None => Ok((name.to_string(), arguments)),
            Some(g) => {
                let offered: Vec<&str> = self.offered(offer).map(|t| t.name).collect();
                let (member, args) = g.unfold(arguments, |m| offered.contains(&m))?;
                Ok((member.to_string(), args))
            }
        }
    }

    /// Every alias of every set, in order.
    pub fn aliases(&self) -> impl Iterator<Item = &'static Alias> + use<> {
        self.sets.iter().flat_map(|s| s.aliases)
    }

    /// The alias named `name` (never a listed tool's name: a test holds it).
    pub fn alias(&self, name: &str) -> Option<&'static Alias> {
        self.aliases().find(|a| a.name == name)
    }

    /// The entry named `name`.
    pub fn tool(&self, name: &str) -> Option<&ToolDef> {
        self.tools().find(|t| t.name == name)
    }

    /// Run one tool call. Bad arguments, a refused path, a process id that
    /// does not exist, a daemon error: `Ok(CallToolResult::error(..))` whose
    /// text names the field and what is allowed. `Err(ErrorData)` only for a
    /// name that is not one of this family's tools.
    ///
    /// When `ctx.cancel` fires, or the returned future is dropped, the calls
    /// in flight are cancelled in the daemon and what the call started is
    /// ended.
    pub async fn call(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        ctx: &ToolContext,
    ) -> std::result::Result<CallToolResult, ErrorData> {
        let (name, arguments) = match self.together(name) {
            Some(g) => match g.unfold(arguments, |_| true) {
                Ok((member, args)) => (member, args),
                Err(why) => return Ok(ToolError::Invalid(format!("{name}: {why}")).into_result()),
            },
            None => (name, arguments),
        };
        let call = match (self.tool(name), self.alias(name)) {
            (Some(t), _) => Some((t.call, t.name)),
            (None, Some(a)) => Some((a.call, a.name)),
            (None, None) => None,
        };
        let Some((call, name)) = call else {
            let known: Vec<&str> = self.tools().map(|t| t.name).collect();
            return Err(ErrorData::invalid_params(
                format!(
                    "tool {name:?} not found; the {} tools are {}",
                    self.kind.as_str(),
                    known.join(", ")
                ),
                None,
            ));
        };
        let args = Value::Object(arguments.unwrap_or_default());
        let work = call(ctx, name, args);
        let outcome = tokio::select! {
            biased;
            _ = ctx.cancel.cancelled() => Err(ToolError::Cancelled),
            r = work => r,
        };
        Ok(outcome.unwrap_or_else(ToolError::into_result))
    }
}

/// One entry of a family's listing.
enum Listed {
    One(&'static ToolDef),
    Together(&'static Together),
}

/// The tool names of a kind's golden listing
/// (`fixtures/schemas/<kind>-tools.json`, every group offered), in order.
#[cfg(test)]
pub(crate) fn golden_names(kind: SettingKind) -> Vec<String> {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../fixtures/schemas/{}-tools.json", kind.as_str()));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let tools: Vec<Tool> = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    tools.into_iter().map(|t| t.name.to_string()).collect()
}

/// A computer whose connection has ended, for unit tests of calls.
#[cfg(test)]
pub(crate) struct Dead;

#[cfg(test)]
impl computerd::client::ComputerClient for Dead {
    fn call_value<'a>(
        &'a self,
        _method: &'a str,
        _params: Value,
    ) -> BoxFuture<'a, computerd::client::Result<Value>> {
        Box::pin(async { Err(computerd::client::ClientError::Closed("x".into())) })
    }
    fn close(&self) {}
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::Arc;

    use rmcp::model::ContentBlock;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    use serde_json::json;

    use super::*;
    use crate::ToolContext;
    use crate::define::{done, hints, make_tool};

    /// Every group a kind can have: what the golden listing shows. Its
    /// row's groups, and for a browser the sandbox's too: a browser in a
    /// computer of ours keeps its daemon's exec, files and processes (a
    /// vendor's has none), which the seed's row does not list.
    fn every_group(kind: SettingKind) -> Vec<Group> {
        let row = kind.row();
        let mut groups = [row.required, row.optional].concat();
        if kind == SettingKind::Browser {
            for g in [Group::Exec, Group::Files, Group::Processes] {
                if !groups.contains(&g) {
                    groups.push(g);
                }
            }
        }
        groups
    }

    #[test]
    fn a_session_is_offered_the_skills_of_the_tools_it_lists_only() {
        let kinds = |kind| -> Vec<&str> {
            registry()
                .skilled_for(kind)
                .iter()
                .map(|f| f.kind.as_str())
                .collect()
        };
        assert_eq!(kinds(SettingKind::Sandbox), ["sandbox"]);
        assert_eq!(
            kinds(SettingKind::Desktop),
            ["desktop", "sandbox", "browser"]
        );
        assert_eq!(kinds(SettingKind::Browser), ["browser", "sandbox"]);
    }

    /// Each family's names, descriptions and schemas are held to a golden
    /// file, `fixtures/schemas/<kind>-tools.json`, so a change to what
    /// models see is a reviewed change ([`computer_testkit::assert_golden`]:
    /// on a mismatch the new listing is written beside it as
    /// `*.current.json`; `COMPUTER_MCP_ACCEPT_SCHEMAS=1` accepts it).
    #[test]
    fn every_family_matches_its_golden_schemas() {
        for family in registry().families() {
            let groups = every_group(family.kind);
            let offer = Offer {
                groups: &groups,
                extend: true,
            };
            let tools = family.list(&offer, &ToolSettings::default());
            let mut text = serde_json::to_string_pretty(&tools).unwrap();
            text.push('\n');
            computer_testkit::assert_golden(&format!("{}-tools", family.kind.as_str()), &text);
        }
    }

    #[test]
    fn the_sandbox_kind_lists_todays_twelve_tools_with_their_golden_schemas() {
        let family = registry().family(SettingKind::Sandbox).unwrap();
        let groups = vec![Group::Exec, Group::Files, Group::Processes];
        let offer = Offer {
            groups: &groups,
            extend: true,
        };
        let tools = family.list(&offer, &ToolSettings::default());
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, golden_names(SettingKind::Sandbox));
        assert_eq!(names.len(), 15);
        let golden = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/schemas/sandbox-tools.json");
        let want: Value = serde_json::from_str(&std::fs::read_to_string(golden).unwrap()).unwrap();
        assert_eq!(serde_json::to_value(&tools).unwrap(), want);
        assert_eq!(family.names(&offer), names);
    }

    /// The compact JSON size of a kind's whole listing, every group offered.
    fn listing_bytes(kind: SettingKind) -> usize {
        let family = registry().family(kind).unwrap();
        let groups = every_group(kind);
        let offer = Offer {
            groups: &groups,
            extend: true,
        };
        let mut tools = family.list(&offer, &ToolSettings::default());
        // As where a viewer is served: the screenshot tools name its app.
        tools.iter_mut().for_each(crate::fleet::tie_app);
        serde_json::to_string(&tools).unwrap().len()
    }

    /// What `tools/list` sends for a sandbox, as compact JSON, is context
    /// every model pays for on every turn: at most 12 KB (12,000 bytes).
    #[test]
    fn the_sandbox_listing_fits_in_12_kb() {
        let bytes = listing_bytes(SettingKind::Sandbox);
        assert!(
            bytes <= 12_000,
            "the sandbox tools/list is {bytes} bytes of compact JSON, over 12 KB"
        );
    }

    /// What a session's whole `tools/list` is, as compact JSON: its
    /// family's tools and the fleet tools (all of them, as where the
    /// provider can pause and snapshot and a viewer is served:
    /// request_takeover too on a screen), every group offered, with the
    /// server's default settings.
    /// Each kind is held to 20 KB (20,000 bytes), against 18.5 KB for
    /// Playwright MCP 0.0.86's 25 tools: a desktop lists its page tools
    /// inside `browser`, a browser its rarer acts, and both their process
    /// tools inside `process`; output schemas are listed only on request.
    #[test]
    fn every_kinds_whole_listing_fits_in_20_kb() {
        for family in registry().families() {
            // computer_snapshot (and computer_new's `from`) are listed on
            // a sandbox server only.
            let pausing = crate::fleet::FleetPolicy {
                kinds: vec![family.kind],
                pause: true,
                view: true,
                snapshot: family.kind == SettingKind::Sandbox,
                ..Default::default()
            };
            let mut fleet = crate::fleet::tools(&pausing);
            for t in &mut fleet {
                t.output_schema = None;
            }
            let fleet_bytes = serde_json::to_string(&fleet).unwrap().len() - 1;
            let bytes = listing_bytes(family.kind) + fleet_bytes;
            eprintln!("{}: {bytes} B", family.kind.as_str());
            assert!(
                bytes <= 20_000,
                "the {} tools/list is {bytes} bytes of compact JSON, over 20 KB",
                family.kind.as_str()
            );
        }
    }

    #[test]
    fn the_table_is_one_family_per_kind_each_tool_named_once_needing_its_kinds_groups() {
        let reg = registry();
        for (i, f) in reg.families().iter().enumerate() {
            assert!(
                reg.families()[..i].iter().all(|g| g.kind != f.kind),
                "two families for {}",
                f.kind.as_str()
            );
            let kind_groups = every_group(f.kind);
            let tools: Vec<&ToolDef> = f.tools().collect();
            for (j, t) in tools.iter().enumerate() {
                assert!(
                    tools[..j].iter().all(|u| u.name != t.name),
                    "{} is listed twice in the {} family",
                    t.name,
                    f.kind.as_str()
                );
                let needed: &[Group] = match &t.needs {
                    Needs::Group(g) => std::slice::from_ref(g),
                    Needs::All(gs) => gs,
                    _ => &[],
                };
                for g in needed {
                    assert!(
                        offered(*g, &kind_groups),
                        "{} needs {g}, which a {} never has",
                        t.name,
                        f.kind.as_str()
                    );
                }
                assert_eq!(t.tool(&ToolSettings::default()).name, t.name);
            }
        }
    }

    /// Every `ToolDef::new("name"` in the crate's sources outside tests,
    /// with the file it is in: each is a tool definition.
    fn defined_tools() -> Vec<(String, String)> {
        fn walk(dir: &std::path::Path, out: &mut Vec<(String, String)>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    walk(&path, out);
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                let code = text.split("#[cfg(test)]").next().unwrap();
                for def in code.split("ToolDef::new(").skip(1) {
                    let def = def.trim_start();
                    let Some(rest) = def.strip_prefix('"') else {
                        continue;
                    };
                    let name = rest.split('"').next().unwrap();
                    out.push((name.to_string(), path.display().to_string()));
                }
            }
        }
        let mut out = Vec::new();
        walk(
            &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut out,
        );
        out
    }

    #[test]
    fn each_tool_is_defined_once_and_listed_by_a_family() {
        let defined = defined_tools();
        assert!(defined.len() > 30, "{defined:?}");
        for (i, (name, file)) in defined.iter().enumerate() {
            if let Some((_, other)) = defined[..i].iter().find(|(n, _)| n == name) {
                panic!("{name} is defined twice: in {other} and in {file}");
            }
            assert!(
                registry()
                    .families()
                    .iter()
                    .any(|f| f.tools().any(|t| t.name == name)),
                "{name} (in {file}) is listed by no family"
            );
        }
        for family in registry().families() {
            for t in family.tools() {
                assert!(
                    defined.iter().any(|(n, _)| n == t.name),
                    "{} is listed but its definition was not found",
                    t.name
                );
            }
        }
    }

    // -------------------------------------------- a throwaway family

    #[derive(Debug, Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct ShoutArgs {
        /// The words to say louder, as they are.
        words: String,
    }

    #[derive(Debug, Serialize, JsonSchema)]
    struct ShoutOutput {
        /// The words in capitals.
        loud: String,
    }

    fn shout_tool(name: &'static str, s: &ToolSettings) -> Tool {
        make_tool::<ShoutArgs, ShoutOutput>(
            name,
            format!(
                "Say the words louder (at most {} bytes).",
                s.output_budget_bytes
            ),
            hints("Shout", true, false, true, false),
        )
    }

    async fn shout(ctx: &ToolContext, a: ShoutArgs) -> Result<CallToolResult> {
        let loud = format!("{} ({})", a.words.to_uppercase(), ctx.facts.id);
        Ok(done(loud.clone(), &ShoutOutput { loud }))
    }

    /// A throwaway set, listed by two throwaway families beside a real set.
    const SHOUT: ToolSet = ToolSet {
        name: "shout",
        tools: &[ToolDef::new(
            "shout",
            Needs::Group(Group::Cdp),
            shout_tool,
            handler!(shout),
        )],
        aliases: &[],
    };

    const THROWAWAY: &[Family] = &[
        Family {
            kind: SettingKind::Browser,
            instructions: "A test family.",
            skill: "---\nname: browser\ndescription: A test.\n---\n# A test\n",
            sets: &[SHOUT, crate::common::TOOLS],
            together: &[],
        },
        Family {
            kind: SettingKind::Desktop,
            instructions: "Another test family.",
            skill: "---\nname: desktop\ndescription: A test.\n---\n# A test\n",
            sets: &[crate::sandbox::TOOLS, SHOUT],
            together: &[],
        },
    ];

    /// The second throwaway family with the throwaway tool listed inside
    /// one tool, `say`.
    const SAYING: Family = Family {
        together: &[Together {
            name: "say",
            title: "Say",
            lead: "Say things.",
            members: crate::Members::Set(&SHOUT),
        }],
        ..THROWAWAY[1]
    };

    #[tokio::test]
    async fn a_tool_listed_together_is_listed_inside_the_one_tool_and_called_by_either_name() {
        let groups = [Group::Cdp, Group::Exec];
        let offer = Offer {
            groups: &groups,
            extend: false,
        };
        assert_eq!(SAYING.names(&offer), ["exec", "say"]);
        let tools = SAYING.list(&offer, &ToolSettings::default());
        let say = tools.iter().find(|t| t.name == "say").unwrap();
        let d = say.description.as_deref().unwrap();
        assert!(d.contains("\n- shout(words): Say the words louder"), "{d}");
        assert!(say.input_schema["properties"]["computer"].is_object());
        assert!(tools.iter().all(|t| t.output_schema.is_none()));
        assert!(SAYING.offers("say", &offer) && SAYING.offers("shout", &offer));
        let without = Offer {
            groups: &[Group::Exec],
            extend: false,
        };
        assert!(!SAYING.offers("say", &without));
        assert_eq!(SAYING.names(&without), ["exec"]);
        let args = |v: Value| match v {
            Value::Object(o) => Some(o),
            _ => None,
        };
        let (name, unfolded) = SAYING
            .unfold(
                "say",
                args(json!({"action": "shout", "args": {"words": "hi"}})),
                &offer,
            )
            .unwrap();
        assert_eq!(name, "shout");
        let ctx = ToolContext::new(Arc::new(Dead));
        let r = SAYING.call(&name, unfolded, &ctx).await.unwrap();
        assert_eq!(r.is_error, Some(false));
        // The one tool's name works with call too, and a bad act is words.
        let r = SAYING
            .call("say", args(json!({"action": "whisper"})), &ctx)
            .await
            .unwrap();
        assert_eq!(r.is_error, Some(true));
        let e = SAYING
            .unfold("say", args(json!({"action": "shout"})), &without)
            .unwrap_err();
        assert_eq!(
            e,
            "this computer offers none of say's acts; nothing was done"
        );
    }

    #[test]
    fn a_tool_added_to_a_set_is_listed_by_every_family_that_lists_the_set() {
        let reg = Registry::new(THROWAWAY);
        let groups = [Group::Cdp, Group::Exec];
        let offer = Offer {
            groups: &groups,
            extend: true,
        };
        for family in reg.families() {
            assert!(
                family.offers("shout", &offer),
                "the {} family does not list shout",
                family.kind.as_str()
            );
        }
        let desktop = reg.family(SettingKind::Desktop).unwrap();
        assert_eq!(desktop.names(&offer), ["exec", "shout"]);
    }

    #[tokio::test]
    async fn a_new_family_is_listed_and_called_through_the_registry_alone() {
        let reg = Registry::new(THROWAWAY);
        assert!(reg.family(SettingKind::Sandbox).is_none());
        let family = reg.family(SettingKind::Browser).unwrap();
        let groups = vec![Group::Cdp];
        let offer = Offer {
            groups: &groups,
            extend: false,
        };
        let tools = family.list(&offer, &ToolSettings::default());
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, ["shout", "computer_info"]);
        assert_eq!(
            tools[0].description.as_deref(),
            Some("Say the words louder (at most 24576 bytes).")
        );
        assert_eq!(
            tools[0].input_schema["properties"]["words"]["type"],
            "string"
        );
        let without = Offer {
            groups: &[],
            extend: false,
        };
        assert_eq!(family.names(&without), ["computer_info"]);
        assert!(!family.offers("shout", &without));

        let ctx = ToolContext {
            facts: crate::ComputerFacts {
                id: "b1".into(),
                ..Default::default()
            },
            ..ToolContext::new(Arc::new(Dead))
        };
        let args = serde_json::json!({"words": "hello"});
        let r = family
            .call("shout", args.as_object().cloned(), &ctx)
            .await
            .unwrap();
        assert_eq!(r.is_error, Some(false));
        assert_eq!(
            r.content[0].as_text().map(|t| t.text.as_str()),
            Some("HELLO (b1)")
        );
        assert_eq!(
            r.structured_content,
            Some(serde_json::json!({"loud": "HELLO (b1)"}))
        );
        let r = family.call("shout", None, &ctx).await.unwrap();
        assert_eq!(r.is_error, Some(true));
        assert_eq!(
            r.content,
            vec![ContentBlock::text("shout: missing field `words`")]
        );
        let e = family.call("exec", None, &ctx).await.unwrap_err();
        assert_eq!(
            e.message,
            "tool \"exec\" not found; the browser tools are shout, computer_info, computer_extend"
        );
    }
}
