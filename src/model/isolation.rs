//! Tenant isolation: what NetworkPolicies say about a namespace, and the words for it.
//!
//! A namespace is **default-deny** for a direction (ingress or egress) when a policy that
//! selects every pod of it (`podSelector: {}`) has that direction in its policy types, and
//! no policy that selects every pod opens the direction to everyone (a rule with no peers and
//! no ports, a peer `namespaceSelector: {}` without a pod selector — every pod of every
//! namespace — or an `ipBlock` of `0.0.0.0/0` or `::/0`). Policy types follow Kubernetes:
//! `policyTypes` when given, else Ingress, and Egress when the policy has egress rules.
//! Cilium's policies (`crate::cluster::cilium`) are read into the same shape; a clusterwide
//! one is kept under the namespace `*` and applies to the namespaces it selects.

/// The namespace a clusterwide policy (Cilium's) is kept under.
pub const ALL_NAMESPACES: &str = "*";

/// One direction of a policy, reduced to what isolation needs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PolicyDir {
    /// The direction is in the policy's types: the pods it selects are isolated for it.
    pub isolates: bool,
    /// A rule lets everyone in (or out).
    pub allows_all: bool,
}

/// A NetworkPolicy, compact.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NetPolicySpec {
    pub namespace: String,
    pub name: String,
    /// `podSelector: {}`: it selects every pod of its namespace.
    pub all_pods: bool,
    pub ingress: PolicyDir,
    pub egress: PolicyDir,
    /// A clusterwide policy (namespace `*`): the namespaces it selects (empty: all)...
    pub only: Vec<String>,
    /// ...and those it leaves out.
    pub except: Vec<String>,
}

impl NetPolicySpec {
    /// Whether a clusterwide policy selects the pods of namespace `ns`.
    pub fn applies_to(&self, ns: &str) -> bool {
        (self.only.is_empty() || self.only.iter().any(|n| n == ns)) && !self.except.iter().any(|n| n == ns)
    }
}

/// What a namespace's policies add up to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NsIsolation {
    pub ingress_deny: bool,
    pub egress_deny: bool,
    pub policies: u32,
}

impl NsIsolation {
    /// Sums up the policies of one namespace.
    pub fn of<'a>(policies: impl IntoIterator<Item = &'a NetPolicySpec>) -> NsIsolation {
        let (mut iso_in, mut iso_out, mut open_in, mut open_out, mut n) = (false, false, false, false, 0);
        for p in policies {
            n += 1;
            if p.all_pods {
                iso_in |= p.ingress.isolates;
                iso_out |= p.egress.isolates;
                open_in |= p.ingress.isolates && p.ingress.allows_all;
                open_out |= p.egress.isolates && p.egress.allows_all;
            }
        }
        NsIsolation { ingress_deny: iso_in && !open_in, egress_deny: iso_out && !open_out, policies: n }
    }
}

/// A tenant's isolation as its namespaces' policies and its neighbours on GPUs make it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TenantIsolation {
    pub namespaces: u32,
    /// Namespaces without default-deny ingress, by name.
    pub open: Vec<String>,
    /// Namespaces with default-deny egress too.
    pub egress_deny: u32,
    /// GPUs one of whose MIG instances, replicas or capacity shares another tenant holds.
    pub shared_gpus: u32,
}

impl TenantIsolation {
    /// `deny`, `deny in` (ingress only), `open 2/3` (namespaces without default-deny); `-`
    /// for a tenant without namespaces (a Kueue ClusterQueue no LocalQueue points at).
    pub fn netpol_text(&self) -> String {
        if self.namespaces == 0 {
            "-".into()
        } else if !self.open.is_empty() {
            format!("open {}/{}", self.open.len(), self.namespaces)
        } else if self.egress_deny == self.namespaces {
            "deny".into()
        } else {
            "deny in".into()
        }
    }
}

/// The Pod Security Standards' levels, least strict first, as the
/// `pod-security.kubernetes.io/enforce` label names them.
pub const POD_SECURITY_LEVELS: [&str; 3] = ["privileged", "baseline", "restricted"];

/// The namespace label Pod Security admission enforces.
pub const POD_SECURITY_ENFORCE: &str = "pod-security.kubernetes.io/enforce";

/// What Pod Security admission enforces in a tenant's namespaces.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodSecurity {
    pub namespaces: u32,
    /// Namespaces without a level it knows (no label, or another value), by name: what the
    /// API server's own default applies there is not on the API.
    pub unset: Vec<String>,
    /// The least strict level of the others.
    pub weakest: Option<&'static str>,
}

impl PodSecurity {
    /// `restricted`, `baseline`, `privileged` (the least strict enforced), `unset 1/3`
    /// (namespaces without one); `-` for a tenant without namespaces.
    pub fn text(&self) -> String {
        match (self.namespaces, self.unset.len(), self.weakest) {
            (0, ..) => "-".into(),
            (n, u, _) if u > 0 => format!("unset {u}/{n}"),
            (_, _, Some(level)) => level.into(),
            (_, _, None) => "-".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_security_says_the_least_strict_level_or_how_many_namespaces_have_none() {
        let ps = |unset: &[&str], weakest| PodSecurity {
            namespaces: 3,
            unset: unset.iter().map(|s| s.to_string()).collect(),
            weakest,
        };
        assert_eq!(ps(&[], Some("baseline")).text(), "baseline");
        assert_eq!(ps(&["a"], Some("restricted")).text(), "unset 1/3");
        assert_eq!(PodSecurity::default().text(), "-");
    }

    fn p(all_pods: bool, ingress: (bool, bool), egress: (bool, bool)) -> NetPolicySpec {
        NetPolicySpec {
            all_pods,
            ingress: PolicyDir { isolates: ingress.0, allows_all: ingress.1 },
            egress: PolicyDir { isolates: egress.0, allows_all: egress.1 },
            ..Default::default()
        }
    }

    #[test]
    fn default_deny_needs_an_all_pods_policy_and_no_open_door() {
        assert_eq!(NsIsolation::of([]), NsIsolation::default());
        let deny_in = p(true, (true, false), (false, false));
        let i = NsIsolation::of([&deny_in]);
        assert!(i.ingress_deny && !i.egress_deny);
        // A policy for some pods only does not isolate the namespace.
        assert!(!NsIsolation::of([&p(false, (true, false), (true, false))]).ingress_deny);
        // Another all-pods policy letting everyone in opens it again.
        let open = p(true, (true, true), (false, false));
        assert!(!NsIsolation::of([&deny_in, &open]).ingress_deny);
        // Allow rules for some pods (an ingress controller) leave the default in place.
        let some_open = p(false, (true, true), (false, false));
        let both = p(true, (true, false), (true, false));
        let i = NsIsolation::of([&both, &some_open]);
        assert!(i.ingress_deny && i.egress_deny && i.policies == 2);
    }

    #[test]
    fn the_tenant_words() {
        let t = TenantIsolation { namespaces: 3, open: vec!["a".into(), "b".into()], ..Default::default() };
        assert_eq!(t.netpol_text(), "open 2/3");
        let t = TenantIsolation { namespaces: 2, egress_deny: 2, ..Default::default() };
        assert_eq!(t.netpol_text(), "deny");
        let t = TenantIsolation { namespaces: 2, egress_deny: 1, ..Default::default() };
        assert_eq!(t.netpol_text(), "deny in");
    }
}
