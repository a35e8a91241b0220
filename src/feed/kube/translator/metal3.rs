//! Metal3 BareMetalHosts (when the CRDs are installed: where Metal3 provisions the hosts).

use kube::api::DynamicObject;

use super::{Translator, split};
use crate::model::Delta;

impl Translator {
    pub(super) fn host(&mut self, o: Option<&DynamicObject>, key: &str, out: &mut Vec<Delta>) {
        let h = o.and_then(|o| serde_json::to_value(o).ok()).and_then(|v| crate::cluster::metal3::host(&v));
        match h {
            Some(h) => out.push(Delta::HostUpsert(h)),
            None => {
                let (namespace, name) = split(key);
                out.push(Delta::HostRemove { namespace, name });
            }
        }
    }
}
