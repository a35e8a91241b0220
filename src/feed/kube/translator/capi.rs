//! Cluster API Machines (when the CRDs are installed: a management cluster).

use kube::api::DynamicObject;

use super::{Translator, split};
use crate::model::Delta;

impl Translator {
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
