//! One object as the API server holds it, asked for by the person (`y` on a row, `fabrik
//! describe`): its YAML with `managedFields` folded, and the events about it. Not watched:
//! fetched once per request, shown with the time it was read.

use super::Ts;

/// The kind of an [`InspectTarget`] that is a `:kubectl` command rather than an object.
const KUBECTL: &str = "kubectl";

/// Which object: its kind as the API names it (`Pod`, `Node`, `ResourceQuota`, …), its
/// namespace (none for cluster-scoped kinds) and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InspectTarget {
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

impl InspectTarget {
    pub fn new(kind: &str, namespace: Option<&str>, name: &str) -> Self {
        Self { kind: kind.to_string(), namespace: namespace.map(str::to_string), name: name.to_string() }
    }
    /// `:kubectl ARGS`: the command's words after `kubectl`, run with the cockpit's context.
    pub fn kubectl(args: &str) -> Self {
        Self { kind: KUBECTL.to_string(), namespace: None, name: args.to_string() }
    }
    pub fn is_kubectl(&self) -> bool {
        self.kind == KUBECTL
    }
    /// `pod/ns/name`, `node/name`, `kubectl get pods`.
    pub fn label(&self) -> String {
        if self.is_kubectl() {
            return format!("kubectl {}", self.name);
        }
        match &self.namespace {
            Some(ns) => format!("{}/{ns}/{}", self.kind.to_lowercase(), self.name),
            None => format!("{}/{}", self.kind.to_lowercase(), self.name),
        }
    }
}

/// An event about the object, as `kubectl describe` lists them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InspectEvent {
    /// When it last happened (ms).
    pub last: Ts,
    /// `Normal` or `Warning`.
    pub type_: String,
    pub reason: String,
    pub count: u32,
    /// The component that reported it.
    pub from: String,
    pub message: String,
}

/// What the API server answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InspectDoc {
    /// The object as YAML, `managedFields` left out (`folded` says how many entries).
    pub yaml: String,
    pub folded: usize,
    /// Oldest first.
    pub events: Vec<InspectEvent>,
    /// Why the events are missing, when they could not be listed (the object still shows).
    pub events_error: Option<String>,
    /// For a command's output (`:kubectl`): how it ended (`exit 0`); the output is `yaml`.
    pub note: Option<String>,
}

/// One answer: the object, or why there is none (not found, forbidden, not served).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inspected {
    /// The request this answers (the cockpit numbers them: asking again for the same object
    /// waits for the new answer, not the last one).
    pub request: u64,
    pub target: InspectTarget,
    /// When it was read (ms, this machine's clock).
    pub at: Ts,
    pub result: Result<InspectDoc, String>,
}

/// `kubectl` verbs that only read: what `:kubectl` runs (with `--readonly` too).
pub const KUBECTL_READ_VERBS: &[&str] = &[
    "get",
    "describe",
    "logs",
    "top",
    "explain",
    "api-resources",
    "api-versions",
    "version",
    "events",
    "cluster-info",
];

/// The words of a `:kubectl` line, or why fabrik will not run it: a verb that may change the
/// cluster (changes go through fabrik's previewed, audited operations, or your shell), a
/// stream that never ends (`--watch`, `--follow`), or a flag that would leave this cockpit's
/// context.
pub fn kubectl_args(line: &str) -> Result<Vec<String>, String> {
    let words = shlex::split(line).ok_or_else(|| format!("cannot split {line:?} into words: an unclosed quote?"))?;
    // The verb first: a flag's value before it (`-n x get`) would read as the verb.
    let Some(verb) = words.first() else {
        return Err("say what to run: :kubectl get pods -A, :kubectl describe node NAME, …".into());
    };
    if verb.starts_with('-') {
        return Err(format!("start with the verb (:kubectl get pods {verb} …), flags after it"));
    }
    let auth_read = verb == "auth" && words.iter().any(|w| w == "can-i" || w == "whoami");
    if !KUBECTL_READ_VERBS.contains(&verb.as_str()) && !auth_read {
        return Err(format!(
            "fabrik runs only kubectl verbs that read here ({}, auth can-i/whoami); `{verb}` may change the cluster: \
             use fabrik's operations (previewed and audited) or a shell",
            KUBECTL_READ_VERBS.join(", ")
        ));
    }
    for w in &words {
        let flag = w.split('=').next().unwrap_or(w);
        if matches!(flag, "-w" | "--watch" | "--watch-only" | "-f" | "--follow") {
            return Err(format!("{flag} streams without end: the pane shows a command's output once it exits"));
        }
        if matches!(flag, "--context" | "--kubeconfig" | "--cluster" | "--server" | "-s" | "--user" | "--token") {
            return Err(format!("{flag}: :kubectl runs with this cockpit's context; :ctx NAME switches it"));
        }
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_lines_that_read_are_split_and_the_rest_refused_with_the_reason() {
        assert_eq!(
            kubectl_args("get pods -A -o wide"),
            Ok(vec!["get", "pods", "-A", "-o", "wide"].into_iter().map(String::from).collect())
        );
        assert_eq!(kubectl_args("describe pod 'x y' -n a").map(|w| w.len()), Ok(5));
        assert!(kubectl_args("auth can-i delete pods").is_ok());
        for (line, says) in [
            ("delete pod x", "`delete` may change"),
            ("auth reconcile -f x", "`auth` may change"),
            ("scale deploy web --replicas 0", "`scale` may change"),
            ("get pods -w", "-w streams"),
            ("logs p --follow", "--follow streams"),
            ("get nodes --context=prod", "--context: :kubectl runs with this cockpit's context"),
            ("get 'pods", "unclosed quote"),
            ("", "say what to run"),
            ("-n a delete pod x", "start with the verb"),
        ] {
            let e = kubectl_args(line).expect_err(line);
            assert!(e.contains(says), "{line}: {e}");
        }
    }
}
