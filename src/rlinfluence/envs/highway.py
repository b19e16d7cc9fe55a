"""highway-v0 on a faster simulator whose trajectories are bit-identical to highway-env's.

Stock highway-v0 spends its time in scalar numpy: `np.clip`, `np.linalg.norm` and 2-vector `np.dot`
on single numbers, lane coordinates recomputed ~1,300 times a decision step by the neighbour search,
55 collision pre-checks per physics step, and observations assembled through pandas DataFrames.
The classes here are subclasses of highway-env's that keep every floating-point operation that
decides a trajectory as it is and drop only the overhead around it:

- `AxisAlignedLane`: a straight lane along +x (every lane of highway-v0). Its local coordinates
  are two subtractions, which is exactly what the library's dot products with the unit vectors
  (1, 0) and (-0, 1) compute.
- `FastRoadNetwork`, `FastRoad`: the closest lane, neighbour search, collision pre-checks and the
  observation's distance filter on plain floats. Where a float distance decides a comparison, a
  decision within `DISTANCE_TOLERANCE` of the threshold is left to the library's own expression.
- `FastIDMVehicle`, `FastMDPVehicle`: the library's kinematics and controllers with built-in
  `min`/`max` in place of `np.clip` and a cached heading direction. Transcendentals (`np.sin`,
  `np.power`, ...) and the 2-vector `np.dot` stay numpy calls: numpy may use its own SIMD or BLAS
  (FMA) kernels, which need not round like `math`.
- `NumpyKinematics`: the Kinematics observation built with numpy instead of pandas, normalised
  with the library's own `normalize_obs`.

`FastHighwayEnv` (registered as `rlinfluence.envs.highway:highway-v0-fast`) is highway-v0 with these
parts; highway-env itself is not modified, and stock highway-v0 stays usable in the same process.
tests/envs/test_highway_speed.py checks the trajectories step by step against the library's;
benchmarks/highway_speed.py measures the speed-up. Importing this module imports highway-env
(and pandas): only `gym.make` of that id does.
"""

from __future__ import annotations

import functools
import math

import gymnasium as gym
import numpy as np
from highway_env import utils
from highway_env.envs.common.action import DiscreteMetaAction
from highway_env.envs.common.observation import KinematicObservation
from highway_env.envs.highway_env import HighwayEnv
from highway_env.road.lane import StraightLane
from highway_env.road.road import Road, RoadNetwork
from highway_env.vehicle.behavior import IDMVehicle
from highway_env.vehicle.controller import MDPVehicle
from highway_env.vehicle.kinematics import Vehicle
from highway_env.vehicle.objects import Landmark

# Float distances (hypot) and the library's (np.linalg.norm) differ by a few ulps, ~1e-13 m on a
# 10 km road. Comparisons closer to their threshold than this are decided the library's way.
DISTANCE_TOLERANCE = 1e-6  # [m]


def clip(value: float, low: float, high: float) -> float:
    """np.clip for one number, without its ~5 us of array machinery (same value for non-NaN input)."""
    return low if value < low else high if value > high else value


def xy(position) -> list[float]:
    """A position (array or sequence) as two floats: float arithmetic is ~5x faster than numpy scalars'."""
    return position.tolist() if type(position) is np.ndarray else list(position)


@functools.cache
def is_subclass(cls: type, base: type) -> bool:
    """isinstance(x, base) as is_subclass(type(x), base), without an ABC check on every call."""
    return issubclass(cls, base)


# ---------------------------------------------------------------- road


class AxisAlignedLane(StraightLane):
    """A StraightLane along +x: local coordinates are position - start, as the library's dot
    products with direction (1, 0) and lateral direction (-0, 1) compute them."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if not self.runs_along_x(self):
            raise ValueError(f"AxisAlignedLane runs along +x, not {self.direction}")
        self.start_x, self.start_y = self.start.tolist()

    @staticmethod
    def runs_along_x(lane) -> bool:
        return isinstance(lane, StraightLane) and lane.direction.tolist() == [1.0, 0.0]

    @classmethod
    def from_lane(cls, lane: StraightLane) -> AxisAlignedLane:
        return cls(lane.start, lane.end, lane.width, lane.line_types, lane.forbidden, lane.speed_limit, lane.priority)

    def local_coordinates(self, position) -> tuple[float, float]:
        x, y = xy(position)
        return float(x - self.start_x), float(y - self.start_y)

    def on_lane(
        self, position, longitudinal: float | None = None, lateral: float | None = None, margin: float = 0
    ) -> bool:
        if longitudinal is None or lateral is None:
            longitudinal, lateral = self.local_coordinates(position)
        return (
            abs(lateral) <= self.width / 2 + margin
            and -self.VEHICLE_LENGTH <= longitudinal < self.length + self.VEHICLE_LENGTH
        )

    def is_reachable_from(self, position) -> bool:
        if self.forbidden:
            return False
        longitudinal, lateral = self.local_coordinates(position)
        return abs(lateral) <= 2 * self.width and 0 <= longitudinal < self.length + self.VEHICLE_LENGTH

    def distance_with_heading(self, position, heading: float | None, heading_weight: float = 1.0) -> float:
        if heading is None:
            return self.distance(position)
        longitudinal, lateral = self.local_coordinates(position)
        return self.distance_at(longitudinal, lateral, heading_weight * abs(utils.wrap_to_pi(heading - self.heading)))

    def distance_at(self, longitudinal: float, lateral: float, heading_term: float) -> float:
        """distance_with_heading from local coordinates and the weighted heading difference."""
        beyond_end, before_start = longitudinal - self.length, 0 - longitudinal  # the library takes max(., 0)
        return (
            abs(lateral)
            + (beyond_end if beyond_end > 0 else 0)
            + (before_start if before_start > 0 else 0)
            + heading_term
        )


class FastRoadNetwork(RoadNetwork):
    """A RoadNetwork whose +x straight lanes are AxisAlignedLanes."""

    @classmethod
    def from_network(cls, network: RoadNetwork) -> FastRoadNetwork:
        fast = cls()
        for origin, destinations in network.graph.items():
            for destination, lanes in destinations.items():
                for lane in lanes:
                    # exactly StraightLane: a subclass (SineLane) has other coordinates
                    along_x = type(lane) is StraightLane and AxisAlignedLane.runs_along_x(lane)
                    fast.add_lane(origin, destination, AxisAlignedLane.from_lane(lane) if along_x else lane)
        return fast

    def get_closest_lane_index(self, position, heading: float | None = None):
        x, y = xy(position)
        # +x lanes share heading 0: the heading term is the same for all of them
        heading_term = None if heading is None else abs(utils.wrap_to_pi(heading - 0.0))
        best_index, best_distance = None, None
        for origin, destinations in self.graph.items():
            for destination, lanes in destinations.items():
                for lane_id, lane in enumerate(lanes):
                    if heading_term is not None and isinstance(lane, AxisAlignedLane):
                        distance = lane.distance_at(x - lane.start_x, y - lane.start_y, heading_term)
                    else:
                        distance = lane.distance_with_heading(position, heading)
                    if best_distance is None or distance < best_distance:  # the first minimum, as np.argmin
                        best_index, best_distance = (origin, destination, lane_id), distance
        return best_index


def certainly_apart(a, b, dt: float) -> bool:
    """Whether an edge normal of the two rectangles separates a, swept by its displacement relative
    to b over dt, from b by more than DISTANCE_TOLERANCE. The library's `are_polygons_intersecting`
    projects onto the same normals, so it would report neither a collision nor an imminent one."""
    (a_x, a_y), (b_x, b_y) = a.position.tolist(), b.position.tolist()
    (a_cos, a_sin), (b_cos, b_sin) = a.direction.tolist(), b.direction.tolist()
    (a_vx, a_vy), (b_vx, b_vy) = a.velocity.tolist(), b.velocity.tolist()
    move_x, move_y = (a_vx - b_vx) * dt, (a_vy - b_vy) * dt
    for nx, ny in ((a_cos, a_sin), (-a_sin, a_cos), (b_cos, b_sin), (-b_sin, b_cos)):
        a_center, a_half = a_x * nx + a_y * ny, half_extent(a, a_cos, a_sin, nx, ny)
        b_center, b_half = b_x * nx + b_y * ny, half_extent(b, b_cos, b_sin, nx, ny)
        a_min, a_max, b_min, b_max = a_center - a_half, a_center + a_half, b_center - b_half, b_center + b_half
        move = move_x * nx + move_y * ny
        a_min, a_max = (a_min + move, a_max) if move < 0 else (a_min, a_max + move)
        if max(b_min - a_max, a_min - b_max) > DISTANCE_TOLERANCE:
            return True
    return False


def half_extent(rectangle, cos: float, sin: float, nx: float, ny: float) -> float:
    """Half the length of a rectangle's projection on the unit axis (nx, ny); (cos, sin) its heading."""
    return rectangle.LENGTH / 2 * abs(cos * nx + sin * ny) + rectangle.WIDTH / 2 * abs(-sin * nx + cos * ny)


class FastRoad(Road):
    """Road with the neighbour search, collision pre-check and observation filter on floats."""

    @classmethod
    def from_road(cls, road: Road) -> FastRoad:
        return cls(
            FastRoadNetwork.from_network(road.network),
            road.vehicles,
            road.objects,
            road.np_random,
            road.record_history,
            road.neighbour_vehicles_connected_lanes,
        )

    def neighbour_vehicles(self, vehicle, lane_index=None):
        lane_index = lane_index or vehicle.lane_index
        if not lane_index:
            return None, None
        lane = self.network.get_lane(lane_index)
        if self.neighbour_vehicles_connected_lanes or not isinstance(lane, AxisAlignedLane):
            return super().neighbour_vehicles(vehicle, lane_index)
        # The library's loop with on_lane(margin=1) and local_coordinates written out on floats.
        start_x, start_y = lane.start_x, lane.start_y
        half_width = lane.width / 2 + 1
        first, end = -lane.VEHICLE_LENGTH, lane.length + lane.VEHICLE_LENGTH
        s = float(vehicle.position[0] - start_x)
        s_front = s_rear = v_front = v_rear = None
        for other in self.vehicles + self.objects:
            if other is vehicle or is_subclass(type(other), Landmark):
                continue
            x, y = other.position.tolist()
            s_other = x - start_x
            if not (abs(y - start_y) <= half_width and first <= s_other < end):
                continue
            if s <= s_other and (s_front is None or s_other <= s_front):
                s_front, v_front = s_other, other
            if s_other < s and (s_rear is None or s_other > s_rear):
                s_rear, v_rear = s_other, other
        return v_front, v_rear

    def step(self, dt: float) -> None:
        for vehicle in self.vehicles:
            vehicle.step(dt)
        # The library's collision loop, minus the pairs whose check would certainly find nothing:
        # farther apart than its spherical pre-check allows, or separated along an edge normal.
        others = self.vehicles + self.objects
        positions = [other.position.tolist() for other in others]
        for i, vehicle in enumerate(self.vehicles):
            (x, y), reach = positions[i], vehicle.diagonal / 2 + vehicle.speed * dt + DISTANCE_TOLERANCE
            for j in range(i + 1, len(others)):
                other_x, other_y = positions[j]
                if math.hypot(other_x - x, other_y - y) <= reach + others[j].diagonal / 2 and not certainly_apart(
                    vehicle, others[j], dt
                ):
                    vehicle.handle_collisions(others[j], dt)

    def close_objects_to(
        self,
        vehicle,
        distance: float,
        count: int | None = None,
        see_behind: bool = True,
        sort: bool = True,
        vehicles_only: bool = False,
    ) -> list:
        x, y = vehicle.position.tolist()

        def within(other) -> bool:  # norm(other - vehicle) < distance, the library's way near the edge
            other_x, other_y = other.position.tolist()
            gap = math.hypot(other_x - x, other_y - y) - distance
            if abs(gap) > DISTANCE_TOLERANCE:
                return gap < 0
            return bool(np.linalg.norm(other.position - vehicle.position) < distance)

        def ahead(other) -> bool:
            return -2 * vehicle.LENGTH < vehicle.lane_distance_to(other)

        found = [v for v in self.vehicles if v is not vehicle and within(v) and (see_behind or ahead(v))]
        if not vehicles_only:
            found += [o for o in self.objects if within(o) and ahead(o)]
        if sort:
            found = sorted(found, key=lambda o: abs(vehicle.lane_distance_to(o)))
        return found[:count] if count else found


# ---------------------------------------------------------------- vehicles


class FastKinematics:
    """Vehicle.step and ControlledVehicle.steering_control without np.clip and numpy scalars where
    floats round alike, and the direction and velocity arrays cached until heading or speed change.
    A mixin in front of a highway-env vehicle class."""

    # the heading `_direction` and the (speed, heading) `_velocity` were computed for
    _direction_heading = _velocity_state = None

    @property
    def direction(self) -> np.ndarray:
        if self._direction_heading != self.heading:
            self._direction = np.array([np.cos(self.heading), np.sin(self.heading)])
            self._direction.flags.writeable = False  # shared between calls: nobody may edit it
            self._direction_heading = self.heading
        return self._direction

    @property
    def velocity(self) -> np.ndarray:
        if self._velocity_state != (self.speed, self.heading):
            self._velocity = self.speed * self.direction
            self._velocity.flags.writeable = False
            self._velocity_state = (self.speed, self.heading)
        return self._velocity

    def step(self, dt: float) -> None:
        self.clip_actions()
        beta = np.arctan(0.5 * np.tan(self.action["steering"]))
        course = self.heading + beta
        position = self.position
        position[0] += self.speed * np.cos(course) * dt
        position[1] += self.speed * np.sin(course) * dt
        if self.impact is not None:
            position += self.impact
            self.crashed = True
            self.impact = None
        self.heading += self.speed * np.sin(beta) / (self.LENGTH / 2) * dt
        self.speed += self.action["acceleration"] * dt
        self.on_state_update()

    def steering_control(self, target_lane_index) -> float:
        target_lane = self.road.network.get_lane(target_lane_index)
        longitudinal, lateral = target_lane.local_coordinates(self.position)
        future_heading = target_lane.heading_at(longitudinal + self.speed * self.TAU_PURSUIT)
        speed = utils.not_zero(self.speed)
        # lateral offset -> lateral speed -> heading reference -> heading rate -> steering angle
        lateral_speed_command = -self.KP_LATERAL * lateral
        heading_command = np.arcsin(clip(lateral_speed_command / speed, -1, 1))
        heading_ref = future_heading + clip(heading_command, -np.pi / 4, np.pi / 4)
        heading_rate_command = self.KP_HEADING * utils.wrap_to_pi(heading_ref - self.heading)
        slip_angle = np.arcsin(clip(self.LENGTH / 2 / speed * heading_rate_command, -1, 1))
        steering_angle = np.arctan(2 * np.tan(slip_angle))
        return float(clip(steering_angle, -self.MAX_STEERING_ANGLE, self.MAX_STEERING_ANGLE))


class FastMDPVehicle(FastKinematics, MDPVehicle):
    """The ego vehicle of DiscreteMetaAction."""

    def act(self, action=None) -> None:
        if action is not None:  # a decision: the library's
            super().act(action)
            return
        # Every physics step: track the current targets, as ControlledVehicle.act(None) does
        # (its np.clip of the steering is a no-op: steering_control bounds the angle).
        self.follow_road()
        Vehicle.act(
            self,
            {
                "steering": self.steering_control(self.target_lane_index),
                "acceleration": self.speed_control(self.target_speed),
            },
        )


class FastIDMVehicle(FastKinematics, IDMVehicle):
    """highway-v0's other vehicles (IDM longitudinal, MOBIL lateral)."""

    def step(self, dt: float) -> None:
        self.timer += dt  # IDMVehicle.step's lane-change timer, then the kinematics
        super().step(dt)

    def act(self, action=None) -> None:
        if self.crashed:
            return
        self.follow_road()
        if self.enable_lane_change:
            self.change_lane_policy()
        steering = self.steering_control(self.target_lane_index)  # already within +-MAX_STEERING_ANGLE
        front, rear = self.road.neighbour_vehicles(self, self.lane_index)
        acceleration = self.acceleration(self, front, rear)
        if self.lane_index != self.target_lane_index:  # changing lane: mind both lanes' traffic
            front, rear = self.road.neighbour_vehicles(self, self.target_lane_index)
            acceleration = min(acceleration, self.acceleration(self, front, rear))
        Vehicle.act(self, {"steering": steering, "acceleration": clip(acceleration, -self.ACC_MAX, self.ACC_MAX)})

    def acceleration(self, ego_vehicle, front_vehicle=None, rear_vehicle=None) -> float:
        if not ego_vehicle or not is_subclass(type(ego_vehicle), Vehicle):
            return 0
        target_speed = getattr(ego_vehicle, "target_speed", 0)
        if ego_vehicle.lane and ego_vehicle.lane.speed_limit is not None:
            target_speed = clip(target_speed, 0, ego_vehicle.lane.speed_limit)
        ratio = max(ego_vehicle.speed, 0) / abs(utils.not_zero(target_speed))
        acceleration = self.COMFORT_ACC_MAX * (1 - np.power(ratio, self.DELTA))
        if front_vehicle:
            gap = ego_vehicle.lane_distance_to(front_vehicle)
            acceleration -= self.COMFORT_ACC_MAX * np.power(
                self.desired_gap(ego_vehicle, front_vehicle) / utils.not_zero(gap), 2
            )
        return acceleration

    def desired_gap(self, ego_vehicle, front_vehicle=None, projected: bool = True) -> float:
        if projected:
            speed_difference = (ego_vehicle.velocity - front_vehicle.velocity).dot(ego_vehicle.direction)
        else:
            speed_difference = ego_vehicle.speed - front_vehicle.speed
        braking = math.sqrt(-self.COMFORT_ACC_MAX * self.COMFORT_ACC_MIN)  # sqrt rounds as np.sqrt (IEEE)
        return (
            self.DISTANCE_WANTED
            + ego_vehicle.speed * self.TIME_WANTED
            + ego_vehicle.speed * speed_difference / (2 * braking)
        )


class FastDiscreteMetaAction(DiscreteMetaAction):
    @property
    def vehicle_class(self):
        return functools.partial(FastMDPVehicle, target_speeds=self.target_speeds)


# ---------------------------------------------------------------- observation and env


class NumpyKinematics(KinematicObservation):
    """KinematicObservation without pandas: the same rows, normalised by the library's normalize_obs."""

    TABLE_FEATURES = ["presence", "x", "y", "vx", "vy"]  # read straight off a Vehicle

    def __init__(self, env, **kwargs) -> None:
        super().__init__(env, **kwargs)
        self.dtype = self.space().dtype  # space() builds a new Box on every call
        self.features_in_table = set(self.features) <= set(self.TABLE_FEATURES)

    def observe(self) -> np.ndarray:
        if not self.env.road:
            return super().observe()
        ego = self.observer_vehicle
        others = self.env.road.close_objects_to(
            ego,
            self.env.PERCEPTION_DISTANCE,
            count=self.vehicles_count - 1,
            see_behind=self.see_behind,
            sort=self.order == "sorted",
            vehicles_only=not self.include_obstacles,
        )
        observed = [ego] + others[-self.vehicles_count + 1 :]
        origin = ego if not self.absolute else None
        if self.features_in_table and all(is_subclass(type(v), Vehicle) for v in observed):
            # Vehicle.to_dict's values of these features, relative ones as its x - origin x, ...
            table = np.array([[1.0, *v.position.tolist(), *v.velocity.tolist()] for v in observed])
            if origin:
                table[1:, 1:] -= table[0, 1:]
            columns = {f: table[:, self.TABLE_FEATURES.index(f)] for f in self.features}
        else:
            rows = [ego.to_dict()] + [
                v.to_dict(origin, observe_intentions=self.observe_intentions) for v in observed[1:]
            ]
            columns = {f: np.array([row[f] for row in rows], np.float64) for f in self.features}
        if self.normalize:  # the present rows only; missing rows are zero-padded after, as upstream
            columns = self.normalize_obs(columns)
        obs = np.zeros((self.vehicles_count, len(self.features)))
        obs[: len(observed)] = np.stack([columns[f] for f in self.features], axis=1)
        if self.order == "shuffled":
            self.env.np_random.shuffle(obs[1:])
        return obs.astype(self.dtype)


class FastHighwayEnv(HighwayEnv):
    @classmethod
    def default_config(cls) -> dict:
        config = super().default_config()
        config["other_vehicles_type"] = utils.get_class_path(FastIDMVehicle)
        return config

    def define_spaces(self) -> None:
        super().define_spaces()
        # other observation and action types stay the library's
        if type(self.observation_type) is KinematicObservation:
            self.observation_type = NumpyKinematics(self, **self.config["observation"])
            self.observation_space = self.observation_type.space()
        if type(self.action_type) is DiscreteMetaAction:
            self.action_type = FastDiscreteMetaAction(self, **self.config["action"])

    def _create_road(self) -> None:
        super()._create_road()
        self.road = FastRoad.from_road(self.road)


gym.register(id="highway-v0-fast", entry_point=FastHighwayEnv)
