//! Candid text for `offline-engine call`, as `dfx canister call` speaks it: arguments are parsed
//! from Candid text and encoded with the method's argument types, replies are decoded with its
//! return types, both taken from the service the wasm embeds (`candid:service` metadata).

use candid::types::{Function, Type, TypeInner};
use candid::{IDLArgs, TypeEnv};
use candid_parser::utils::CandidSource;

/// Why a Candid text argument or reply could not be handled.
#[derive(Debug, thiserror::Error)]
pub enum CallTextError {
    /// The wasm embeds no service description.
    #[error("the wasm has no candid:service metadata (and no get_candid_pointer): pass --arg-hex")]
    NoInterface,
    /// The embedded service description does not parse or type-check.
    #[error("the wasm's candid:service does not parse: {0}")]
    Interface(String),
    /// The service has no such method.
    #[error("the service has no method `{method}` (it has: {known})")]
    NoMethod {
        /// The method asked for.
        method: String,
        /// The methods it has.
        known: String,
    },
    /// The argument text is not Candid.
    #[error("the argument is not Candid text: {0}")]
    Parse(String),
    /// The argument does not have the method's argument types.
    #[error("the argument does not fit {what} {types}: {cause}")]
    Encode {
        /// What it is the argument of.
        what: String,
        /// The expected types.
        types: String,
        /// Candid's reason.
        cause: String,
    },
    /// The reply does not decode with the method's return types.
    #[error("the reply does not decode as {types}: {cause}")]
    Decode {
        /// The expected types.
        types: String,
        /// Candid's reason.
        cause: String,
    },
}

/// A canister's service description, parsed.
pub struct Interface {
    env: TypeEnv,
    actor: Type,
}

fn types_text(types: &[Type]) -> String {
    let parts: Vec<String> = types.iter().map(|t| t.to_string()).collect();
    format!("({})", parts.join(", "))
}

impl Interface {
    /// Parses a `.did` text (`service : (init) -> { ... }` or `service : { ... }`).
    pub fn parse(did: &str) -> Result<Interface, CallTextError> {
        let (env, actor) = CandidSource::Text(did)
            .load()
            .map_err(|e| CallTextError::Interface(e.to_string()))?;
        let actor = actor.ok_or_else(|| CallTextError::Interface("no service".into()))?;
        Ok(Interface { env, actor })
    }

    fn method<'a>(&'a self, name: &'a str) -> Result<&'a Function, CallTextError> {
        self.env.get_method(&self.actor, name).map_err(|_| {
            let known = self
                .env
                .as_service(&self.actor)
                .map(|s| {
                    s.iter()
                        .map(|(n, _)| n.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default();
            CallTextError::NoMethod {
                method: name.to_string(),
                known,
            }
        })
    }

    /// True if the service declares `method` a query (or composite query).
    pub fn is_query(&self, method: &str) -> bool {
        self.method(method).is_ok_and(|f| f.is_query())
    }

    fn encode(
        text: &str,
        env: &TypeEnv,
        types: &[Type],
        what: String,
    ) -> Result<Vec<u8>, CallTextError> {
        let args: IDLArgs =
            candid_parser::parse_idl_args(text).map_err(|e| CallTextError::Parse(e.to_string()))?;
        args.to_bytes_with_types(env, types)
            .map_err(|e| CallTextError::Encode {
                what,
                types: types_text(types),
                cause: e.to_string(),
            })
    }

    /// Encodes the Candid text `text` (e.g. `("alice", "alice@example.com")`) as the arguments of
    /// `method`.
    pub fn encode_args(&self, method: &str, text: &str) -> Result<Vec<u8>, CallTextError> {
        let f = self.method(method)?;
        Self::encode(text, &self.env, &f.args, format!("`{method}`'s arguments"))
    }

    /// Encodes the Candid text `text` as the service's init arguments (`service : (init) -> ...`;
    /// none for a service without them).
    pub fn encode_init(&self, text: &str) -> Result<Vec<u8>, CallTextError> {
        let init: Vec<Type> = match self.actor.as_ref() {
            TypeInner::Class(args, _) => args.clone(),
            _ => Vec::new(),
        };
        Self::encode(text, &self.env, &init, "the init arguments".into())
    }

    /// Decodes a reply of `method` with its return types and prints it as Candid text.
    pub fn decode_reply(&self, method: &str, bytes: &[u8]) -> Result<String, CallTextError> {
        let f = self.method(method)?;
        let args = IDLArgs::from_bytes_with_types(bytes, &self.env, &f.rets).map_err(|e| {
            CallTextError::Decode {
                types: types_text(&f.rets),
                cause: e.to_string(),
            }
        })?;
        Ok(args.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candid::{CandidType, Deserialize, Encode};

    const DID: &str = r#"
type Settings = record { flush_size : opt nat32; max_delay_ms : opt nat64 };
type Outcome = variant { Committed : record { rowid : int64 }; Failed : record { code : int32; message : text } };
service : (opt Settings) -> {
  create_user : (text, text) -> (Outcome);
  counts : () -> (nat64) query;
}
"#;

    #[derive(CandidType, Deserialize, Debug, PartialEq)]
    enum Outcome {
        Committed { rowid: i64 },
        Failed { code: i32, message: String },
    }

    #[derive(CandidType, Deserialize, Debug, PartialEq)]
    struct Settings {
        flush_size: Option<u32>,
        max_delay_ms: Option<u64>,
    }

    #[test]
    fn arguments_are_typed_by_the_service() {
        let i = Interface::parse(DID).unwrap();
        let bytes = i
            .encode_args("create_user", r#"("alice", "alice@example.com")"#)
            .unwrap();
        assert_eq!(bytes, Encode!(&"alice", &"alice@example.com").unwrap());
        // Numbers take the declared type: `opt nat32`, not the literal's default.
        let init = i
            .encode_init("(opt record { flush_size = opt 1000 })")
            .unwrap();
        assert_eq!(
            init,
            Encode!(&Some(Settings {
                flush_size: Some(1000),
                max_delay_ms: None
            }))
            .unwrap()
        );
        assert!(i.is_query("counts") && !i.is_query("create_user"));
    }

    #[test]
    fn replies_decode_with_field_names() {
        let i = Interface::parse(DID).unwrap();
        let reply = Encode!(&Outcome::Failed {
            code: 787,
            message: "FOREIGN KEY constraint failed".into()
        })
        .unwrap();
        let text = i.decode_reply("create_user", &reply).unwrap();
        assert!(text.contains("Failed"), "{text}");
        assert!(text.contains("code = 787"), "{text}");
        assert!(text.contains("\"FOREIGN KEY constraint failed\""), "{text}");
    }

    #[test]
    fn mistakes_name_their_cause() {
        let i = Interface::parse(DID).unwrap();
        let e = i.encode_args("create_user", "(1, 2)").unwrap_err();
        assert!(matches!(e, CallTextError::Encode { .. }), "{e}");
        assert!(e.to_string().contains("(text, text)"), "{e}");
        let e = i.encode_args("create_user", "(\"a\"").unwrap_err();
        assert!(matches!(e, CallTextError::Parse(_)), "{e}");
        let e = i.encode_args("drop_table", "()").unwrap_err();
        assert!(e.to_string().contains("has no method `drop_table`"), "{e}");
        assert!(e.to_string().contains("create_user"), "{e}");
        let e = i
            .decode_reply("counts", b"DIDL\x00\x01\x71\x01x")
            .unwrap_err();
        assert!(matches!(e, CallTextError::Decode { .. }), "{e}");
        assert!(Interface::parse("service : { broken").is_err());
    }
}
