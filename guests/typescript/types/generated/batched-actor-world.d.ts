/// <reference path="./interfaces/sluice-actor-actor.d.ts" />
/// <reference path="./interfaces/sluice-actor-batch.d.ts" />
/// <reference path="./interfaces/sluice-actor-bus.d.ts" />
/// <reference path="./interfaces/sluice-actor-host.d.ts" />
/// <reference path="./interfaces/sluice-actor-outbox.d.ts" />
/// <reference path="./interfaces/sluice-actor-turns.d.ts" />
/// <reference path="./interfaces/sluice-actor-types.d.ts" />
declare module 'sluice:actor/batched-actor-world@0.1.0' {
  export type * as SluiceActorBus010 from 'sluice:actor/bus@0.1.0'; // import sluice:actor/bus@0.1.0
  export type * as SluiceActorHost010 from 'sluice:actor/host@0.1.0'; // import sluice:actor/host@0.1.0
  export type * as SluiceActorOutbox010 from 'sluice:actor/outbox@0.1.0'; // import sluice:actor/outbox@0.1.0
  export type * as SluiceActorTurns010 from 'sluice:actor/turns@0.1.0'; // import sluice:actor/turns@0.1.0
  export type * as SluiceActorTypes010 from 'sluice:actor/types@0.1.0'; // import sluice:actor/types@0.1.0
  export * as batch from 'sluice:actor/batch@0.1.0'; // export sluice:actor/batch@0.1.0
  export * as actor from 'sluice:actor/actor@0.1.0'; // export sluice:actor/actor@0.1.0
}
