//! Cluster API Machines and the objects above them (when the CRDs are installed: a
//! management cluster).

use kube::api::DynamicObject;
use kube::runtime::watcher::Event;

use super::super::Kind;
use super::{Translator, split};
use crate::model::{CapiKind, Delta};

impl Translator {
    /// A Cluster, control plane, MachineDeployment, MachineSet or MachineHealthCheck event.
    pub(super) fn on_capi_event(&mut self, k: CapiKind, e: Event<DynamicObject>, out: &mut Vec<Delta>) {
        self.on_event(Kind::Capi(k), e, out, |t: &mut Self, o, key, out| t.capi(k, o, key, out));
    }

    fn capi(&mut self, kind: CapiKind, o: Option<&DynamicObject>, key: &str, out: &mut Vec<Delta>) {
        let v = o.and_then(|o| serde_json::to_value(o).ok()).and_then(|v| crate::cluster::capi::object(kind, &v));
        match v {
            Some(v) => out.push(Delta::CapiUpsert(v)),
            None => {
                let (namespace, name) = split(key);
                out.push(Delta::CapiRemove { kind, namespace, name });
            }
        }
    }

    pub(super) fn machine(&mut self, o: Option<&DynamicObject>, key: &str, out: &mut Vec<Delta>) {
        let m = o.and_then(|o| serde_json::to_value(o).ok()).and_then(|v| crate::cluster::capi::machine(&v));
        match m {
            Some(m) => out.push(Delta::MachineUpsert(m)),
            None => {
                let (namespace, name) = split(key);
                out.push(Delta::MachineRemove { namespace, name });
            }
        }
    }
}
