"""Names of physical object categories: what an offline phrase extractor may hand to the detector.

An offline extractor (spaCy noun chunks or the rule-based chunker of :mod:`assets.grounding.phrases`)
finds noun-phrase-shaped spans, and many of them name no object at all ("a bit", "remains constant",
"the spoon relative to the cup"). The extractor keeps a candidate only when its head names a physical
object category of this vocabulary: the public category lists of three detection and scene-graph
data sets plus the persons, furniture and shapes of spatial questions that they lack.

- :data:`COCO_CATEGORIES`: the 80 COCO detection categories.
- :data:`LVIS_CATEGORIES`: the 1,203 LVIS v1 categories, spelled as LVIS spells them
  (``trash_can``, ``bow_(weapon)``: underscores for spaces, a parenthesised sense).
- :data:`VG150_CATEGORIES`: the 150 object classes of the Visual Genome split used for scene-graph
  generation (VG150).
- :data:`EXTRA_OBJECT_NAMES`: persons, furniture, vehicles and shapes of spatial questions that the
  three lists name otherwise or not at all ("tv", "nightstand", "pedestrian", "cube").

Plurals are matched through :func:`data_contracts.nouns.singularize` (the project's one noun
normaliser), multi-word names as a whole ("traffic light", "dining table"). A few category names are
also common non-object words ("control", "date", "short"): :data:`AMBIGUOUS_NAMES` leaves them out,
and :data:`NON_OBJECT_NAMES` lists phrases that end in an object word but name none ("cartesian plane").

>>> vocabulary = default_object_vocabulary()
>>> vocabulary.category(["two", "red", "traffic", "lights"]), vocabulary.category(["bit"])
('traffic light', None)
>>> vocabulary.object_words(["spoon", "relative"]), vocabulary.object_words(["remains", "constant"])
(['spoon'], None)
>>> len(COCO_CATEGORIES), len(LVIS_CATEGORIES), len(VG150_CATEGORIES)
(80, 1203, 150)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

from data_contracts.nouns import singularize

VOCABULARY_VERSION = "1"
"""Bump when a list below changes (part of the offline extractor's version)."""

COCO_CATEGORIES: tuple[str, ...] = (
    "person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat", "traffic light",
    "fire hydrant", "stop sign", "parking meter", "bench", "bird", "cat", "dog", "horse", "sheep", "cow",
    "elephant", "bear", "zebra", "giraffe", "backpack", "umbrella", "handbag", "tie", "suitcase", "frisbee",
    "skis", "snowboard", "sports ball", "kite", "baseball bat", "baseball glove", "skateboard", "surfboard",
    "tennis racket", "bottle", "wine glass", "cup", "fork", "knife", "spoon", "bowl", "banana", "apple",
    "sandwich", "orange", "broccoli", "carrot", "hot dog", "pizza", "donut", "cake", "chair", "couch",
    "potted plant", "bed", "dining table", "toilet", "tv", "laptop", "mouse", "remote", "keyboard",
    "cell phone", "microwave", "oven", "toaster", "sink", "refrigerator", "book", "clock", "vase",
    "scissors", "teddy bear", "hair drier", "toothbrush",
)  # fmt: skip
"""The 80 COCO detection categories, in COCO's order."""

VG150_CATEGORIES: tuple[str, ...] = (
    "airplane", "animal", "arm", "bag", "banana", "basket", "beach", "bear", "bed", "bench", "bike",
    "bird", "board", "boat", "book", "boot", "bottle", "bowl", "box", "boy", "branch", "building", "bus",
    "cabinet", "cap", "car", "cat", "chair", "child", "clock", "coat", "counter", "cow", "cup", "curtain",
    "desk", "dog", "door", "drawer", "ear", "elephant", "engine", "eye", "face", "fence", "finger", "flag",
    "flower", "food", "fork", "fruit", "giraffe", "girl", "glass", "glove", "guy", "hair", "hand",
    "handle", "hat", "head", "helmet", "hill", "horse", "house", "jacket", "jean", "kid", "kite", "lady",
    "lamp", "laptop", "leaf", "leg", "letter", "light", "logo", "man", "men", "motorcycle", "mountain",
    "mouth", "neck", "nose", "number", "orange", "pant", "paper", "paw", "people", "person", "phone",
    "pillow", "pizza", "plane", "plant", "plate", "player", "pole", "post", "pot", "racket", "railing",
    "rock", "roof", "room", "sand", "seat", "sheep", "shelf", "shirt", "shoe", "short", "sidewalk", "sign",
    "sink", "skateboard", "ski", "skier", "sneaker", "snow", "sock", "stand", "street", "surfboard",
    "table", "tail", "tie", "tile", "tire", "toilet", "towel", "tower", "track", "train", "tree", "truck",
    "trunk", "umbrella", "vase", "vegetable", "vehicle", "wave", "wheel", "window", "windshield", "wing",
    "wire", "woman", "zebra",
)  # fmt: skip
"""The 150 object classes of VG150 (Visual Genome's scene-graph split), alphabetical as published."""

_LVIS_NAMES = """
aerosol_can air_conditioner airplane alarm_clock alcohol alligator almond ambulance amplifier anklet
antenna apple applesauce apricot apron aquarium arctic_(type_of_shoe) armband armchair armoire armor
artichoke trash_can ashtray asparagus atomizer avocado award awning ax baboon baby_buggy
basketball_backboard backpack handbag suitcase bagel bagpipe baguet bait ball ballet_skirt balloon
bamboo banana Band_Aid bandage bandanna banjo banner barbell barge barrel barrette barrow
baseball_base baseball baseball_bat baseball_cap baseball_glove basket basketball bass_horn
bat_(animal) bath_mat bath_towel bathrobe bathtub batter_(food) battery beachball bead bean_curd
beanbag beanie bear bed bedpan bedspread cow beef_(food) beeper beer_bottle beer_can beetle bell
bell_pepper belt belt_buckle bench beret bib Bible bicycle visor billboard binder binoculars bird
birdfeeder birdbath birdcage birdhouse birthday_cake birthday_card pirate_flag black_sheep
blackberry blackboard blanket blazer blender blimp blinker blouse blueberry gameboard boat bob
bobbin bobby_pin boiled_egg bolo_tie deadbolt bolt bonnet book bookcase booklet bookmark
boom_microphone boot bottle bottle_opener bouquet bow_(weapon) bow_(decorative_ribbons) bow-tie bowl
pipe_bowl bowler_hat bowling_ball box boxing_glove suspenders bracelet brass_plaque brassiere
bread-bin bread breechcloth bridal_gown briefcase broccoli broach broom brownie brussels_sprouts
bubble_gum bucket horse_buggy bull bulldog bulldozer bullet_train bulletin_board bulletproof_vest
bullhorn bun bunk_bed buoy burrito bus_(vehicle) business_card butter butterfly button cab_(taxi)
cabana cabin_car cabinet locker cake calculator calendar calf camcorder camel camera camera_lens
camper_(vehicle) can can_opener candle candle_holder candy_bar candy_cane walking_cane canister
canoe cantaloup canteen cap_(headwear) bottle_cap cape cappuccino car_(automobile)
railcar_(part_of_a_train) elevator_car car_battery identity_card card cardigan cargo_ship carnation
horse_carriage carrot tote_bag cart carton cash_register casserole cassette cast cat cauliflower
cayenne_(spice) CD_player celery cellular_telephone chain_mail chair chaise_longue chalice
chandelier chap checkbook checkerboard cherry chessboard chicken_(animal) chickpea chili_(vegetable)
chime chinaware crisp_(potato_chip) poker_chip chocolate_bar chocolate_cake chocolate_milk
chocolate_mousse choker chopping_board chopstick Christmas_tree slide cider cigar_box cigarette
cigarette_case cistern clarinet clasp cleansing_agent cleat_(for_securing_rope) clementine clip
clipboard clippers_(for_plants) cloak clock clock_tower clothes_hamper clothespin clutch_bag coaster
coat coat_hanger coatrack cock cockroach cocoa_(beverage) coconut coffee_maker coffee_table
coffeepot coil coin colander coleslaw coloring_material combination_lock pacifier comic_book compass
computer_keyboard condiment cone control convertible_(automobile) sofa_bed cooker cookie
cooking_utensil cooler_(for_food) cork_(bottle_plug) corkboard corkscrew edible_corn cornbread
cornet cornice cornmeal corset costume cougar coverall cowbell cowboy_hat crab_(animal) crabmeat
cracker crape crate crayon cream_pitcher crescent_roll crib crock_pot crossbar crouton crow crowbar
crown crucifix cruise_ship police_cruiser crumb crutch cub_(animal) cube cucumber cufflink cup
trophy_cup cupboard cupcake hair_curler curling_iron curtain cushion cylinder cymbal dagger
dalmatian dartboard date_(fruit) deck_chair deer dental_floss desk detergent diaper diary die dinghy
dining_table tux dish dish_antenna dishrag dishtowel dishwasher dishwasher_detergent dispenser
diving_board Dixie_cup dog dog_collar doll dollar dollhouse dolphin domestic_ass doorknob doormat
doughnut dove dragonfly drawer underdrawers dress dress_hat dress_suit dresser drill drone dropper
drum_(musical_instrument) drumstick duck duckling duct_tape duffel_bag dumbbell dumpster dustpan
eagle earphone earplug earring easel eclair eel egg egg_roll egg_yolk eggbeater eggplant
electric_chair refrigerator elephant elk envelope eraser escargot eyepatch falcon fan faucet fedora
ferret Ferris_wheel ferry fig_(fruit) fighter_jet figurine file_cabinet file_(tool) fire_alarm
fire_engine fire_extinguisher fire_hose fireplace fireplug first-aid_kit fish fish_(food) fishbowl
fishing_rod flag flagpole flamingo flannel flap flash flashlight fleece flip-flop_(sandal)
flipper_(footwear) flower_arrangement flute_glass foal folding_chair food_processor
football_(American) football_helmet footstool fork forklift freight_car French_toast freshener
frisbee frog fruit_juice frying_pan fudge funnel futon gag garbage garbage_truck garden_hose gargle
gargoyle garlic gasmask gazelle gelatin gemstone generator giant_panda gift_wrap ginger giraffe
cincture glass_(drink_container) globe glove goat goggles goldfish golf_club golfcart gondola_(boat)
goose gorilla gourd grape grater gravestone gravy_boat green_bean green_onion griddle grill grits
grizzly grocery_bag guitar gull gun hairbrush hairnet hairpin halter_top ham hamburger hammer
hammock hamper hamster hair_dryer hand_glass hand_towel handcart handcuff handkerchief handle
handsaw hardback_book harmonium hat hatbox veil headband headboard headlight headscarf headset
headstall_(for_horses) heart heater helicopter helmet heron highchair hinge hippopotamus
hockey_stick hog home_plate_(baseball) honey fume_hood hook hookah hornet horse hose hot-air_balloon
hotplate hot_sauce hourglass houseboat hummingbird hummus polar_bear icecream popsicle ice_maker
ice_pack ice_skate igniter inhaler iPod iron_(for_clothing) ironing_board jacket jam jar jean jeep
jelly_bean jersey jet_plane jewel jewelry joystick jumpsuit kayak keg kennel kettle key keycard kilt
kimono kitchen_sink kitchen_table kite kitten kiwi_fruit knee_pad knife knitting_needle knob
knocker_(on_a_door) koala lab_coat ladder ladle ladybug lamb_(animal) lamb-chop lamp lamppost
lampshade lantern lanyard laptop_computer lasagna latch lawn_mower leather legging_(clothing) Lego
legume lemon lemonade lettuce license_plate life_buoy life_jacket lightbulb lightning_rod lime
limousine lion lip_balm liquor lizard log lollipop speaker_(stereo_equipment) loveseat machine_gun
magazine magnet mail_slot mailbox_(at_home) mallard mallet mammoth manatee mandarin_orange manger
manhole map marker martini mascot mashed_potato masher mask mast mat_(gym_equipment) matchbox
mattress measuring_cup measuring_stick meatball medicine melon microphone microscope microwave_oven
milestone milk milk_can milkshake minivan mint_candy mirror mitten mixer_(kitchen_tool) money
monitor_(computer_equipment) monkey motor motor_scooter motor_vehicle motorcycle mound_(baseball)
mouse_(computer_equipment) mousepad muffin mug mushroom music_stool musical_instrument nailfile
napkin neckerchief necklace necktie needle nest newspaper newsstand nightshirt nosebag_(for_animals)
noseband_(for_animals) notebook notepad nut nutcracker oar octopus_(food) octopus_(animal) oil_lamp
olive_oil omelet onion orange_(fruit) orange_juice ostrich ottoman oven overalls_(clothing) owl
packet inkpad pad paddle padlock paintbrush painting pajamas palette pan_(for_cooking)
pan_(metal_container) pancake pantyhose papaya paper_plate paper_towel paperback_book paperweight
parachute parakeet parasail_(sports) parasol parchment parka parking_meter parrot
passenger_car_(part_of_a_train) passenger_ship passport pastry patty_(food) pea_(food) peach
peanut_butter pear peeler_(tool_for_fruit_and_vegetables) wooden_leg pegboard pelican pen pencil
pencil_box pencil_sharpener pendulum penguin pennant penny_(coin) pepper pepper_mill perfume
persimmon person pet pew_(church_bench) phonebook phonograph_record piano pickle pickup_truck pie
pigeon piggy_bank pillow pin_(non_jewelry) pineapple pinecone ping-pong_ball pinwheel tobacco_pipe
pipe pistol pita_(bread) pitcher_(vessel_for_liquid) pitchfork pizza place_mat plate platter playpen
pliers plow_(farm_equipment) plume pocket_watch pocketknife poker_(fire_stirring_tool) pole
polo_shirt poncho pony pool_table pop_(soda) postbox_(public) postcard poster pot flowerpot potato
potholder pottery pouch power_shovel prawn pretzel printer projectile_(weapon) projector propeller
prune pudding puffer_(fish) puffin pug-dog pumpkin puncher puppet puppy quesadilla quiche quilt
rabbit race_car racket radar radiator radio_receiver radish raft rag_doll raincoat ram_(animal)
raspberry rat razorblade reamer_(juicer) rearview_mirror receipt recliner record_player reflector
remote_control rhinoceros rib_(food) rifle ring river_boat road_map robe rocking_chair rodent
roller_skate Rollerblade rolling_pin root_beer router_(computer_equipment) rubber_band
runner_(carpet) plastic_bag saddle_(on_an_animal) saddle_blanket saddlebag safety_pin sail salad
salad_plate salami salmon_(fish) salmon_(food) salsa saltshaker sandal_(type_of_shoe) sandwich
satchel saucepan saucer sausage sawhorse saxophone scale_(measuring_instrument) scarecrow scarf
school_bus scissors scoreboard scraper screwdriver scrubbing_brush sculpture seabird seahorse
seaplane seashell sewing_machine shaker shampoo shark sharpener Sharpie shaver_(electric)
shaving_cream shawl shears sheep shepherd_dog sherbert shield shirt shoe shopping_bag shopping_cart
short_pants shot_glass shoulder_bag shovel shower_head shower_cap shower_curtain
shredder_(for_paper) signboard silo sink skateboard skewer ski ski_boot ski_parka ski_pole skirt
skullcap sled sleeping_bag sling_(bandage) slipper_(footwear) smoothie snake snowboard snowman
snowmobile soap soccer_ball sock sofa softball solar_array sombrero soup soup_bowl soupspoon
sour_cream soya_milk space_shuttle sparkler_(fireworks) spatula spear spectacles spice_rack spider
crawfish sponge spoon sportswear spotlight squid_(food) squirrel stagecoach
stapler_(stapling_machine) starfish statue_(sculpture) steak_(food) steak_knife steering_wheel
stepladder step_stool stereo_(sound_system) stew stirrer stirrup stool stop_sign brake_light stove
strainer strap straw_(for_drinking) strawberry street_sign streetlight string_cheese stylus
subwoofer sugar_bowl sugarcane_(plant) suit_(clothing) sunflower sunglasses sunhat surfboard sushi
mop sweat_pants sweatband sweater sweatshirt sweet_potato swimsuit sword syringe Tabasco_sauce
table-tennis_table table table_lamp tablecloth tachometer taco tag taillight tambourine army_tank
tank_(storage_vessel) tank_top_(clothing) tape_(sticky_cloth_or_paper) tape_measure tapestry tarp
tartan tassel tea_bag teacup teakettle teapot teddy_bear telephone telephone_booth telephone_pole
telephoto_lens television_camera television_set tennis_ball tennis_racket tequila thermometer
thermos_bottle thermostat thimble thread thumbtack tiara tiger tights_(clothing) timer tinfoil
tinsel tissue_paper toast_(food) toaster toaster_oven toilet toilet_tissue tomato tongs toolbox
toothbrush toothpaste toothpick cover tortilla tow_truck towel towel_rack toy
tractor_(farm_equipment) traffic_light dirt_bike trailer_truck train_(railroad_vehicle) trampoline
tray trench_coat triangle_(musical_instrument) tricycle tripod trousers truck truffle_(chocolate)
trunk vat turban turkey_(food) turnip turtle turtleneck_(clothing) typewriter umbrella underwear
unicycle urinal urn vacuum_cleaner vase vending_machine vent vest videotape vinegar violin vodka
volleyball vulture waffle waffle_iron wagon wagon_wheel walking_stick wall_clock wall_socket wallet
walrus wardrobe washbasin automatic_washer watch water_bottle water_cooler water_faucet water_heater
water_jug water_gun water_scooter water_ski water_tower watering_can watermelon weathervane webcam
wedding_cake wedding_ring wet_suit wheel wheelchair whipped_cream whistle wig wind_chime windmill
window_box_(for_plants) windshield_wiper windsock wine_bottle wine_bucket wineglass
blinder_(for_horses) wok wolf wooden_spoon wreath wrench wristband wristlet yacht yogurt
yoke_(animal_equipment) zebra zucchini
"""

LVIS_CATEGORIES: tuple[str, ...] = tuple(_LVIS_NAMES.split())
"""The 1,203 LVIS v1 categories in LVIS's order and spelling."""

EXTRA_OBJECT_NAMES: tuple[str, ...] = (
    # persons
    "adult", "baby", "toddler", "teenager", "pedestrian", "cyclist", "biker", "rider", "driver",
    "passenger", "customer", "worker", "chef", "cook", "waiter", "waitress", "student", "teacher",
    "doctor", "nurse", "officer", "policeman", "police officer", "soldier", "athlete", "runner", "jogger",
    "surfer", "swimmer", "dancer", "musician", "singer", "shopper", "tourist", "vendor", "referee",
    "goalkeeper", "batter", "pitcher", "catcher", "boy", "girl", "man", "woman", "lady", "gentleman",
    "guy", "kid", "child", "people", "crowd", "family", "couple", "cashier", "striker", "owner",
    "skateboarder", "snowboarder", "skier", "hiker", "climber", "fisherman", "farmer", "traveler",
    "traveller", "visitor", "guest", "host", "clerk", "guard", "firefighter", "mechanic", "builder",
    "pilot", "captain", "sailor", "rower", "golfer", "tennis player", "spectator", "audience", "user",
    # furniture and fittings
    "tv", "television", "monitor", "screen monitor", "computer", "desktop computer", "tablet", "phone",
    "smartphone", "cellphone", "mobile phone", "speaker", "headphones", "remote", "fridge",
    "microwave", "dishwasher", "washing machine", "dryer", "stove", "cooktop", "range hood",
    "countertop", "counter", "kitchen island", "nightstand", "bedside table", "side table", "end table",
    "coffee table", "tv stand", "coffee machine", "espresso machine", "holder", "mouse pad", "cable",
    "cord", "hose", "pipe", "desk", "bookshelf", "shelf", "shelving unit", "cabinet", "closet",
    "wardrobe", "dresser", "sofa", "couch", "armchair", "office chair", "stool", "bench", "ottoman",
    "footrest", "bed", "mattress", "crib", "rug", "carpet", "mat", "doormat", "blinds", "curtain",
    "door", "doorway", "window", "gate", "fence", "railing", "banister", "stairs", "staircase",
    "ladder", "column", "pillar", "fireplace", "radiator", "heater", "air conditioner", "fan",
    "ceiling fan", "ceiling light", "light", "lamp", "floor lamp", "desk lamp", "chandelier",
    "light switch", "switch", "socket", "outlet", "thermostat", "whiteboard", "chalkboard",
    "bulletin board", "mirror", "clock", "sink", "faucet", "tap", "bathtub", "tub",
    "shower", "toilet", "toilet paper", "towel", "trash can", "trash bin", "garbage can", "garbage bin",
    "bin", "dustbin", "wastebasket", "recycling bin", "laundry basket", "printer", "copier", "projector",
    "keyboard", "mouse", "laptop", "plant", "houseplant", "flower", "cushion", "pillow",
    "blanket", "quilt", "duvet", "bag", "handbag", "purse", "luggage", "package", "parcel", "crate",
    "container", "bucket", "barrel", "tray", "jug", "pitcher", "kettle", "mug", "cup", "glass", "jar",
    "can", "bottle", "plate", "bowl", "pan", "pot", "chopsticks", "cutting board",
    # outdoor and vehicles
    "car", "vehicle", "van", "suv", "taxi", "bus", "truck", "pickup", "trailer", "tractor", "scooter",
    "bicycle", "bike", "motorbike", "motorcycle", "tram", "streetcar", "ambulance", "fire truck",
    "police car", "airplane", "aeroplane", "aircraft", "jet", "helicopter", "ship", "boat", "sailboat",
    "tree", "bush", "shrub", "hedge", "building", "house", "skyscraper", "tower", "bridge", "statue",
    "lighthouse", "pier", "dock", "ramp", "swimming pool", "pool", "playground", "swing", "sandbox",
    "fountain", "lamp post", "street lamp", "streetlight", "traffic sign", "road sign", "sign",
    "traffic cone", "cone", "bollard", "barrier", "mailbox", "hydrant", "parking meter", "billboard",
    "tent", "umbrella", "horse", "animal", "pet",
    # things, toys and shapes
    "ball", "toy", "toy car", "block", "brick", "cube", "sphere", "cylinder", "pyramid", "prism", "disk",
    "ring", "gear", "robot arm", "puzzle piece", "arrow", "candlestick", "candle holder", "card", "box", "carton", "bookmark", "book", "notebook",
    "folder", "paper", "document", "envelope", "pen", "pencil", "marker", "scissors", "stapler", "tape",
    "camera", "tripod", "guitar", "piano", "keyboard instrument", "drum", "violin", "vase", "candle",
    "teapot", "sculpture", "painting", "poster", "photo frame", "picture frame", "key",
    "wallet", "watch", "glasses", "sunglasses", "hat", "cap", "helmet", "shoe", "boot", "jeans",
    "pants", "shorts", "trousers", "dress", "skirt", "shirt", "t-shirt", "jacket", "coat", "sweater",
    "hoodie", "scarf", "glove", "backpack",
)  # fmt: skip
"""Names of spatial questions missing from the three lists (or spelled there another way)."""

AMBIGUOUS_NAMES = frozenset(
    "bob cast chap cock control cornet crape crisp cub date flap flash gag gargle heart number pad pop "
    "prune ram room scale short slide tag tux cover log letter stand track".split()
)
"""Category names that are mostly other words in questions ("the same date", "a short man", "a tag"):
never an object on their own, though they still end longer names ("price tag" is not one, "log cabin"
neither; "traffic light" is)."""

NON_OBJECT_NAMES: tuple[str, ...] = (
    "cartesian plane", "image plane", "ground plane", "floor plane", "horizontal plane", "vertical plane",
    "focal plane", "flat plane", "number line", "point of view", "field of view", "line of sight",
    "time frame", "reference frame", "frame of reference", "coordinate frame", "body frame",
    "camera frame", "world frame", "light source", "sunlight", "daylight", "shadow", "eye level",
    "bird's eye view", "bird's-eye view", "bird's eye",
)  # fmt: skip
"""Phrases that end in an object word but name no object ("the cartesian plane")."""

COLOUR_ONLY = frozenset(
    "red green blue yellow orange purple violet pink brown black white gray grey teal cyan magenta beige "
    "gold golden silver navy maroon tan cream ivory turquoise olive khaki crimson lime dark light pale "
    "bright".split()
)
"""Colour words: a phrase made of these alone ("orange" as an answer option) is a colour, not a fruit."""

_SENSE = re.compile(r"_?\([^)]*\)")


def normalise_name(name: str) -> tuple[str, ...]:
    """A category name as the words it is matched by: lower case, the sense in brackets dropped,
    underscores as spaces, the last word singular.

    >>> normalise_name("bus_(vehicle)"), normalise_name("Traffic lights"), normalise_name("bow-tie")
    (('bus',), ('traffic', 'light'), ('bow-tie',))
    """
    words = _SENSE.sub("", name).replace("_", " ").lower().split()
    if not words:
        return ()
    return (*words[:-1], singularize(words[-1]))


def _forms(name: str) -> set[tuple[str, ...]]:
    """The word tuples a name matches: as written, and with inner hyphens as spaces ("bow-tie", "bow tie")."""
    forms = {normalise_name(name)}
    if "-" in name:
        forms.add(normalise_name(name.replace("-", " ")))
    return {form for form in forms if form}


def _lowered(words: Sequence[str]) -> list[str]:
    """Lower-case words, the last one singular and without a possessive "'s" ("boys'", "man's" -> "man")."""
    if not words:
        return []
    last = words[-1].lower().removesuffix("'s").removesuffix("'")
    return [word.lower() for word in words[:-1]] + [singularize(last)]


class ObjectVocabulary:
    """A set of object category names, matched against the last words of a phrase.

    Args:
        names (`Iterable[str]`): category names (any of the spellings above).
        ambiguous (`Iterable[str]`, *optional*): one-word names never accepted on their own.
        non_objects (`Iterable[str]`, *optional*): phrase endings that name no object.

    Example:
        >>> vocabulary = ObjectVocabulary(["dining_table", "cup", "date_(fruit)"], ambiguous=["date"])
        >>> vocabulary.category(["wooden", "dining", "tables"]), vocabulary.category(["date"])
        ('dining table', None)
    """

    def __init__(
        self, names: Iterable[str], ambiguous: Iterable[str] = (), non_objects: Iterable[str] = ()
    ) -> None:
        ambiguous_forms = {normalise_name(word) for word in ambiguous}
        self.names: frozenset[tuple[str, ...]] = frozenset(
            form for name in names for form in _forms(name) if form not in ambiguous_forms
        )
        self.non_objects: frozenset[tuple[str, ...]] = frozenset(
            form for name in non_objects for form in _forms(name)
        )
        self.longest = max((len(form) for form in self.names), default=0)

    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and normalise_name(name) in self.names

    def _ending(self, words: Sequence[str]) -> tuple[str, ...] | None:
        """The longest known name (or non-object) that the words end with, as a tuple of words."""
        lowered = _lowered(words)
        for size in range(min(len(lowered), self.longest), 0, -1):
            ending = tuple(lowered[-size:])
            if ending in self.non_objects:
                return None
            if ending in self.names:
                return ending
            if size == 2 and (ending[0] + ending[1],) in self.names:  # "lamp shade": the LVIS "lampshade"
                return ending
        return None

    def names_no_object(self, words: Sequence[str]) -> bool:
        """True when the words end with a phrase that names no object ("eye level", "cartesian plane").

        >>> default_object_vocabulary().names_no_object(["the", "cartesian", "plane"])
        True
        """
        lowered = _lowered(words)
        return any(tuple(lowered[-size:]) in self.non_objects for size in range(1, len(lowered) + 1))

    def category(self, words: Sequence[str]) -> str | None:
        """The category that the phrase's last words name ("red traffic lights" -> "traffic light"), or None.

        A phrase of colour words alone is a colour, never a category ("orange").
        """
        if words and all(word.lower() in COLOUR_ONLY for word in words):
            return None
        ending = self._ending(words)
        return " ".join(ending) if ending else None

    def object_words(self, words: Sequence[str]) -> list[str] | None:
        """The longest leading part of ``words`` that ends in a category ("spoon relative" -> "spoon"),
        or None when no part does.
        """
        if self.names_no_object(words):
            return None
        for end in range(len(words), 0, -1):
            if self.category(words[:end]) is not None:
                return list(words[:end])
        return None


@lru_cache(maxsize=1)
def default_object_vocabulary() -> ObjectVocabulary:
    """COCO, LVIS, VG150 and the extra names, without the ambiguous ones (built once)."""
    return ObjectVocabulary(
        (*COCO_CATEGORIES, *LVIS_CATEGORIES, *VG150_CATEGORIES, *EXTRA_OBJECT_NAMES),
        ambiguous=AMBIGUOUS_NAMES,
        non_objects=NON_OBJECT_NAMES,
    )
